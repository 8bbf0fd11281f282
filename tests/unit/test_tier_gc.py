"""Which cold chunks a stream can still read: the collector drops only the others."""

from __future__ import annotations

from adapter.protocol.model import Segment, SnapshotPointer, StreamMeta
from adapter.service.tier_gc import needed as needed_by
from adapter.state.catalog import Catalog
from adapter.tier.manifest import TierChunk

SOURCE = StreamMeta("b", "s", 0, "text/plain", 100, 10, 50, 1_000, 1_000)
SETTLED = 10_000  # snapshots published at or before it have been visible a grace period


def _chunk(first: int, last: int, stream_id: str = "s") -> TierChunk:
    return TierChunk(stream_id, f"tier/{first}", first, last, 2, 2, 9)


def _catalog(*metas: StreamMeta, published_at_ms: int = SETTLED) -> Catalog:
    """The streams, each with a snapshot at its retained offset (if any) published then."""
    catalog = Catalog()
    for meta in metas:
        catalog.put_stream(meta)
        if meta.retained_from is not None:
            catalog.put_snapshot(_pointer(meta, published_at_ms))
    return catalog


def _pointer(meta: StreamMeta, published_at_ms: int) -> SnapshotPointer:
    offset = meta.retained_from or 0
    return SnapshotPointer(
        meta.bucket_id, meta.stream_id, offset, "x/y", 1, "k", "", meta.created_at_ms,
        published_at_ms,
    )  # fmt: skip


def needed(catalog: Catalog, bucket_id: str, chunk: TierChunk) -> bool:
    return needed_by(catalog, bucket_id, chunk, SETTLED)


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


def test_below_a_snapshot_not_settled_yet_everything_is_still_needed() -> None:
    """A reader that began before the snapshot may still read below it for a grace period,
    as Kafka keeps those records for as long (`needed_from`)."""
    catalog = _catalog(SOURCE.evolve(retained_from=30), published_at_ms=SETTLED + 1)
    assert needed(catalog, "b", _chunk(10, 29))


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


def test_a_fork_of_another_bucket_needs_its_own_chunks_and_its_sources() -> None:
    """Its records are in its source's bucket's topic, keyed `bucket//id`: the chunks of that
    key are its own, and the source's chunks below the fork point are still read by it."""
    fork = StreamMeta("c", "f", 0, "text/plain", 100, 60, 70, 1_000, 1_000).evolve(
        forked_from="s", source_bucket="b", home="b", inherited=(Segment("s", 10, 40),)
    )
    gone_source = _catalog(fork)  # its source deleted and forgotten: the fork keeps its range
    assert needed(gone_source, "b", _chunk(60, 65, "c//f"))
    assert needed(gone_source, "b", _chunk(30, 45))
    assert not needed(gone_source, "b", _chunk(41, 45))  # past the fork point
    assert not needed(gone_source, "b", _chunk(60, 65, "f"))  # the key of a stream of b
