"""The manifest of the cold tier: its Avro records, and which range covers an offset."""

from __future__ import annotations

from adapter.tier.manifest import Place, TierChunk, TierIndex, TierRange, decode, encode

PLACE = Place("p.bucket.b", 1_700, 2)


def _range(start: int, end: int, place: Place = PLACE) -> TierRange:
    chunk = TierChunk("s/1", f"tier/{start}", start, end - 1, 3, 30, 99)
    return TierRange("b", place.topic, place.epoch_ms, place.partition, start, end, 5, (chunk,))


def test_a_range_reads_back_as_written() -> None:
    written = _range(10, 20)
    assert decode(written.key, encode(written)) == written
    assert written.key == "range:p.bucket.b/1700/2/00000000000000000010"
    assert written.chunk_of("s/1") == written.chunks[0]
    assert written.chunk_of("other") is None


def test_the_index_finds_the_range_covering_an_offset() -> None:
    index = TierIndex()
    for start, end in ((0, 10), (10, 25)):
        index.apply(_range(start, end).key, encode(_range(start, end)))
    assert index.covering(PLACE, 0) == _range(0, 10)
    assert index.covering(PLACE, 24) == _range(10, 25)
    assert index.covering(PLACE, 25) is None
    assert index.covering(Place("p.bucket.b", 1_701, 2), 3) is None  # another incarnation
    assert index.tiered_to(PLACE) == 25
    assert index.places() == [PLACE]


def test_a_range_written_again_replaces_itself_and_a_tombstone_drops_it() -> None:
    index = TierIndex()
    index.put(_range(0, 10))
    index.put(_range(0, 12))
    assert [r.end for r in index.ranges(PLACE)] == [12]
    index.apply(_range(0, 12).key, None)
    assert index.tiered_to(PLACE) is None
    assert index.places() == []
