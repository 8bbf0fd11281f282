"""Which cold chunks a stream can still read: the collector drops only the others."""

from __future__ import annotations

from adapter.service.tier_gc import needed
from adapter.state.catalog import Catalog
from adapter.state.records import Segment, StreamMeta
from adapter.tier.manifest import TierChunk

SOURCE = StreamMeta("b", "s", 0, "text/plain", 100, 10, 50, 1_000, 1_000)


def _chunk(first: int, last: int, stream_id: str = "s") -> TierChunk:
    return TierChunk(stream_id, f"tier/{first}", first, last, 2, 2, 9)


def _catalog(*metas: StreamMeta) -> Catalog:
    catalog = Catalog()
    for meta in metas:
        catalog.put_stream(meta)
    return catalog


def test_a_live_stream_needs_its_chunks_and_not_those_of_an_earlier_stream_of_its_id() -> None:
    catalog = _catalog(SOURCE)
    assert needed(catalog, "b", _chunk(10, 20))
    assert needed(catalog, "b", _chunk(5, 12))  # overlaps the stream's start
    assert not needed(catalog, "b", _chunk(1, 9))  # before its create record: a former stream
    assert not needed(catalog, "b", _chunk(10, 20, "gone"))  # a deleted stream


def test_below_the_retained_offset_nothing_is_needed() -> None:
    catalog = _catalog(SOURCE.evolve(retained_from=30))
    assert not needed(catalog, "b", _chunk(10, 29))
    assert needed(catalog, "b", _chunk(25, 31))


def test_a_fork_of_a_fork_keeps_its_sources_chunks() -> None:
    retained = SOURCE.evolve(retained_from=45)
    fork = StreamMeta(
        "b", "f", 0, "text/plain", 200, 60, 70, 1, 1,
        forked_from="s", fork_offset=30, inherited=(Segment("s", 10, 30),),
    )  # fmt: skip
    grandchild = StreamMeta(
        "b", "g", 0, "text/plain", 300, 80, 90, 1, 1,
        forked_from="f", fork_offset=65, inherited=(Segment("s", 10, 30), Segment("f", 60, 65)),
    )  # fmt: skip
    assert needed(_catalog(retained, fork), "b", _chunk(12, 20))
    assert not needed(_catalog(retained, fork), "b", _chunk(31, 40))  # past the fork point
    only_grandchild = _catalog(retained, fork.evolve(retained_from=70), grandchild)
    assert needed(only_grandchild, "b", _chunk(12, 20))
    assert needed(only_grandchild, "b", _chunk(61, 62, "f"))
