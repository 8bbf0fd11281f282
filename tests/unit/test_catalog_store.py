"""The catalog's bounded memory: a catalog that caches one entry answers like one that caches
everything, and each process gets a catalog file of its own (adapter/state/store.py)."""

from __future__ import annotations

import json
import random
import tracemalloc
from dataclasses import replace
from pathlib import Path

from adapter.protocol.model import BucketMeta, ProducerRecord, Segment, SnapshotPointer, StreamMeta
from adapter.state.catalog import Catalog
from adapter.state.records import encode
from adapter.state.store import FLUSH_ROWS, MISS, PAGE, Checkpoint, FileStore, Lru
from topology.internal_records import producer_key, snapshot_key

BUCKET = BucketMeta("b", "dk.bucket.b", 3, 1)


def _meta(stream_id: str, **changes: object) -> StreamMeta:
    meta = StreamMeta("b", stream_id, 1, "text/plain", 100, 0, 5, 1_000, 1_000)
    return meta.evolve(**changes)


def _observed(catalog: Catalog, ids: list[str]) -> object:
    return (
        [catalog.stream("b", i) for i in ids],
        [catalog.producers("b", i) for i in ids],
        [catalog.snapshot(m) for m in (catalog.stream("b", i) for i in ids) if m is not None],
        list(catalog.stream_ids("b", "", None)),
        list(catalog.stream_ids("b", "s1", "s10")),
        catalog.stream_count("b"),
        [catalog.forks_of("b", i) for i in ids],
        catalog.soft_deleted(),
        catalog.visible_snapshot_keys(),
        list(catalog.streams_of("b")),
    )


def test_a_catalog_caching_one_entry_answers_like_one_caching_all() -> None:
    """Random writes, tombstones and lookups: evicted rows come back from SQLite (pending or
    flushed) exactly as they were, producer states and tombstones included."""
    rng = random.Random(7)
    small, large = Catalog(cache_entries=1), Catalog(cache_entries=100_000)
    ids = [f"s{n}" for n in range(40)]
    for step in range(3 * FLUSH_ROWS):
        stream_id, other = rng.choice(ids), rng.choice(ids)
        action, producers_too = rng.randrange(7), rng.random() < 0.5
        for catalog in (small, large):
            if action == 0:
                catalog.apply(_meta(stream_id).key, encode(_meta(stream_id, next_offset=step)))
            elif action == 1:
                catalog.put_stream(
                    _meta(stream_id, forked_from=other, inherited=(Segment(other, 0, 2),))
                )
            elif action == 2:
                catalog.drop_stream("b", stream_id, producers=producers_too)
            elif action == 3:
                record = ProducerRecord("b", stream_id, f"p{step % 3}", 0, step, step)
                catalog.apply_producer(record.key, encode(record))
            elif action == 4:
                catalog.apply_producer(producer_key("b", stream_id, f"p{step % 3}"), None)
            elif action == 5:
                pointer = SnapshotPointer(
                    "b", stream_id, 3, "text/plain", 1, f"o{step}", "", 100, 1
                )
                catalog.put_snapshot(pointer)
                catalog.put_stream(_meta(stream_id, retained_from=3, soft_deleted=step % 2 == 0))
            else:
                catalog.apply_snapshot(snapshot_key("b", stream_id), None)
        if step % 97 == 0:
            assert _observed(small, ids) == _observed(large, ids)
    assert _observed(small, ids) == _observed(large, ids)


def test_listing_pages_through_the_index_in_byte_order() -> None:
    catalog = Catalog(cache_entries=1)
    ids = [*sorted(f"k{n:05d}" for n in range(2 * PAGE + 3)), "k\u00e9", "k\U0001f600", "l"]
    for stream_id in reversed(ids):
        catalog.put_stream(_meta(stream_id))
    assert list(catalog.stream_ids("b", "k", None)) == ids[:-1]
    assert list(catalog.stream_ids("b", "k", ids[PAGE])) == ids[PAGE + 1 : -1]
    assert catalog.stream_count("b") == len(ids)


def test_a_scan_of_a_bucket_holds_a_page_of_it_not_the_whole() -> None:
    """The tiering pass scans every stream of a bucket every 30 s: holding every id at once
    left a peak the allocator kept (≈ 9 MiB of RSS at 100,000 streams; bench/results/recorded/,
    "RSS growth")."""
    catalog = Catalog(cache_entries=1)
    ids = [f"stream-with-a-name-of-some-length-{n:06d}" for n in range(40 * PAGE)]
    for stream_id in ids:
        catalog.put_stream(_meta(stream_id))
    catalog.store.flush()
    scan = catalog.streams_of("b")
    tracemalloc.start()
    try:
        in_order = all(meta.stream_id == i for (meta, _), i in zip(scan, ids, strict=True))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert in_order
    assert peak < 20 * len(ids)  # the ids alone are ≈ 90 bytes each, their list 8 more


def test_every_visible_snapshot_is_found_across_pages_and_buckets() -> None:
    catalog = Catalog(cache_entries=1)
    keys = set()
    for n in range(2 * PAGE + 3):
        bucket_id, stream_id = ("a", "b")[n % 2], f"s{n}"
        meta = _meta(stream_id, retained_from=3).evolve(bucket_id=bucket_id)
        catalog.put_stream(meta)
        pointer = SnapshotPointer(bucket_id, stream_id, 3, "text/plain", 1, f"o{n}", "", 100, 1)
        catalog.put_snapshot(pointer if n % 5 else replace(pointer, offset=2))  # not visible
        keys |= {f"o{n}"} if n % 5 else set()
    assert catalog.visible_snapshot_keys() == keys


def test_the_lru_keeps_the_most_recently_used() -> None:
    lru: Lru[str, int] = Lru(2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.find("a") == 1  # now the most recent
    lru.put("c", 3)
    assert (len(lru), lru.find("a"), lru.find("c")) == (2, 1, 3)
    assert lru.find("b") is MISS


def test_each_store_takes_its_own_file_and_keeps_it_for_the_next(tmp_path: Path) -> None:
    """A file that is no database is replaced; one process per file; the file outlives the
    process, and what the next one on it reads is the last checkpoint saved."""
    leftover = tmp_path / "catalog-x.0.sqlite3"
    leftover.write_bytes(b"not a database")
    first, second = FileStore(str(tmp_path), "catalog-x"), FileStore(str(tmp_path), "catalog-x")
    assert first.file is None  # nothing opened before the first use
    one, two = Catalog(first), Catalog(second)
    assert first.checkpoint() is None
    one.put_bucket(BUCKET)
    one.put_stream(_meta("a"))
    one.put_stream(_meta("a", next_offset=9))  # dirty in the LRU, not in SQLite yet
    two.put_stream(_meta("b"))
    assert (list(one.stream_ids("b", "", None)), list(two.stream_ids("b", "", None))) == (
        ["a"],
        ["b"],
    )
    assert [first.file, second.file] == [leftover, tmp_path / "catalog-x.1.sqlite3"]
    one.save({"meta": 7}, {"cluster": "c"}, 1234)
    one.put_stream(_meta("later"))  # rows past the checkpoint may be there too
    first.flush()
    one.close()
    assert leftover.exists()
    third = FileStore(str(tmp_path), "catalog-x")
    assert third.checkpoint() == Checkpoint({"meta": 7}, {"cluster": "c"}, 1234)
    resumed = Catalog(third)
    resumed.resume()
    assert third.file == leftover  # the freed number is taken again
    assert (resumed.bucket("b"), resumed.stream("b", "a")) == (BUCKET, _meta("a", next_offset=9))
    assert resumed.stream_count("b") == 2
    resumed.reset()
    assert (third.checkpoint(), resumed.bucket("b"), resumed.stream("b", "a")) == (None,) * 3
    assert list(resumed.stream_ids("b", "", None)) == []
    two.close()
    third.close()


def test_the_lru_keeps_its_estimated_bytes_under_its_budget() -> None:
    lru: Lru[str, str] = Lru(100, max_bytes=10, sizer=len)
    lru.put("a", "xxxx")
    lru.put("b", "yyyy")
    assert (len(lru), lru.bytes) == (2, 8)
    lru.put("c", "zzzz")  # 12 > 10: the least recently used goes
    assert (lru.find("a"), lru.bytes) == (MISS, 8)
    lru.put("d", "w" * 50)  # alone over the budget: kept, alone
    assert (len(lru), lru.bytes, lru.find("d")) == (1, 50, "w" * 50)


def test_a_catalog_bounded_by_bytes_caches_by_size_and_answers_the_same() -> None:
    """A byte budget of about six streams: streams with long fork histories take more of it;
    whatever is evicted comes back from SQLite unchanged."""
    catalog = Catalog(cache_entries=100_000, cache_bytes=3 * 6 * 600)
    metas = [_meta(f"s{n}") for n in range(20)]
    for meta in metas:
        catalog.put_stream(meta)
    assert 4 <= len(catalog._streams) <= 6
    assert catalog._streams.bytes <= 6 * 600
    history = tuple(Segment(f"s{n}", 0, 1) for n in range(10))
    catalog.put_stream(_meta("f", forked_from="s0", inherited=history))
    assert len(catalog._streams) <= 3  # one long history takes the room of several streams
    for n in range(3):
        catalog.put_producer(ProducerRecord("b", "s1", f"p{n}", 0, n, 1))
    assert [catalog.stream("b", m.stream_id) for m in metas] == metas
    assert sorted(catalog.producers("b", "s1")) == ["p0", "p1", "p2"]


def test_a_checkpoint_written_in_steps_holds_every_row_changed_before_it(tmp_path: Path) -> None:
    """The dirty rows are written a step at a time; a row changed between two steps is written
    as it is then if its step is still to come, else it stays dirty for the next checkpoint
    (its change is past the cut either way: harmless). No change is ever lost."""
    store = FileStore(str(tmp_path), "catalog-x")
    catalog = Catalog(store)
    for n in range(600):
        catalog.put_stream(_meta(f"s{n}"))
    catalog.save({"meta": 1}, {}, 1)
    for n in range(600):
        catalog.put_stream(_meta(f"s{n}", next_offset=9))  # dirty, in memory only
    steps = catalog.dirty()
    assert len(steps) == 3  # 600 rows, 256 a step
    steps[0]()
    catalog.put_stream(_meta("s599", next_offset=11))  # changed between two steps
    for step in steps[1:]:
        step()
    catalog.save({"meta": 2}, {}, 2, dirty=False)
    still_dirty = ("b", "s599") in catalog._streams.dirty_keys()
    store.close()
    reopened = Catalog(FileStore(str(tmp_path), "catalog-x"))
    reopened.resume()
    assert [reopened.stream("b", f"s{n}") for n in range(599)] == [
        _meta(f"s{n}", next_offset=9) for n in range(599)
    ]
    # The dirty keys' order is a set's: s599's step ran after its change, or before it and the
    # row waits, dirty, for the next checkpoint.
    held = reopened.stream("b", "s599")
    assert held == _meta("s599", next_offset=11) or (
        held == _meta("s599", next_offset=9) and still_dirty
    )


def test_rows_written_past_the_checkpoint_count_as_ahead_of_their_records(tmp_path: Path) -> None:
    """Rows written to the file between two checkpoints (a full buffer), then a crash: the
    restart cannot tell which were ahead of their state records, so each counts as ahead until
    the meta topic says otherwise; a checkpoint saved clears that list."""
    store = FileStore(str(tmp_path), "catalog-x")
    catalog = Catalog(store, cache_entries=1)
    catalog.put_stream(_meta("kept"))
    catalog.unrecorded.moved(("b", "kept"))
    catalog.save({"meta": 1}, {}, 1)
    written_past = {("b", f"s{n}") for n in range(FLUSH_ROWS)}
    for _b, stream_id in sorted(written_past):  # evicted at once, written by a full buffer
        catalog.put_stream(_meta(stream_id, next_offset=9))
    assert set(store.ahead()) == written_past
    store.close()  # a crash: no checkpoint after those rows
    reopened = Catalog(FileStore(str(tmp_path), "catalog-x"))
    reopened.resume()
    assert set(reopened.unrecorded) == written_past | {("b", "kept")}
    reopened.save({"meta": 2}, {}, 2)
    assert reopened.store.ahead() == []


def test_a_checkpoint_of_rows_with_other_fields_is_not_resumed() -> None:
    """A record that gained a field (a newer `StreamMeta`) makes older positional rows
    unreadable: their file is rebuilt from the log rather than misread."""
    checkpoint = Checkpoint({"meta": 7}, {"cluster": "c"}, 1234)
    assert Checkpoint.loads(checkpoint.dumps()) == checkpoint
    document = json.loads(checkpoint.dumps())
    document["rows"]["StreamMeta"].remove("trimmed_at_ms")
    assert Checkpoint.loads(json.dumps(document)) is None
    del document["rows"]
    assert Checkpoint.loads(json.dumps(document)) is None
