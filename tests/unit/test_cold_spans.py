"""A fork's cold history is its source's chunks up to the fork point, then its own, in offset
order; a chunk the collector dropped is still a span, marked collected."""

from __future__ import annotations

from adapter.protocol.model import Segment, StreamMeta
from adapter.service.cold_spans import cold_spans
from adapter.tier.manifest import TierChunk, TierRange


def _range(start: int, end: int, *chunks: TierChunk) -> TierRange:
    return TierRange("b", "t", 1, 0, start, end, 0, chunks)


def _chunk(stream_id: str, first: int, last: int) -> TierChunk:
    return TierChunk(stream_id, f"tier/{stream_id}/{first}.avro", first, last, 1, 1, 1)


def test_a_forks_spans_follow_its_segments_and_the_ranges_in_offset_order() -> None:
    fork = StreamMeta(
        "b", "f", 0, "text/plain", 0, 50, 90, 0, 0, inherited=(Segment("s", 0, 35),)
    )  # fmt: skip
    ranges = [
        _range(0, 30, _chunk("s", 2, 28).as_collected(), _chunk("x", 1, 29)),
        _range(30, 60, _chunk("s", 31, 58), _chunk("f", 52, 59)),
        _range(60, 100, _chunk("f", 61, 99)),  # past the stream's tail: its end bounds it
    ]
    spans = [(s.stream_id, s.start, s.stop, s.collected) for s in cold_spans(ranges, fork)]
    assert spans == [
        ("s", 2, 29, True),
        ("s", 31, 35, False),  # the source's messages after the fork point are not the fork's
        ("f", 52, 60, False),
        ("f", 61, 90, False),
    ]
    assert [s.tier_range.start for s in cold_spans(ranges, fork)] == [0, 30, 30, 60]
