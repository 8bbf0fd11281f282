"""The streams ahead of their last state record: set by what moves a stream here without a
record, left only for a record at or past that state (followed, or the echo of our own)."""

from __future__ import annotations

import json
from pathlib import Path

from adapter.protocol.model import BucketMeta, StreamMeta
from adapter.state.catalog import Catalog
from adapter.state.records import encode
from adapter.state.store import Checkpoint, FileStore
from adapter.state.unrecorded import Unrecorded, short_of
from topology.internal_records import FORMAT_LEVEL_KEY, bucket_key, producer_key

BUCKET = BucketMeta("b", "dk.bucket.b", 3, 1)
RECORDED = StreamMeta("b", "s", 1, "text/plain", 100, 0, 5, 1_000, 1_000)
LEARNED = RECORDED.evolve(next_offset=9, message_count=4)  # its records, read here
KEY = ("b", "s")


def _learned(catalog: Catalog | None = None) -> Catalog:
    """A catalog that followed the stream's record, then learned it further from its data."""
    catalog = catalog if catalog is not None else Catalog()
    catalog.put_bucket(BUCKET)
    catalog.apply(RECORDED.key, encode(RECORDED))
    catalog.put_stream(LEARNED)
    catalog.unrecorded.moved(KEY)
    return catalog


def test_a_followed_record_short_of_the_state_here_leaves_it_unrecorded() -> None:
    catalog = _learned()
    catalog.apply(RECORDED.key, encode(RECORDED.evolve(next_offset=7)))
    assert (KEY in catalog.unrecorded, catalog.stream(*KEY)) == (True, LEARNED)


def test_a_followed_record_at_or_past_the_state_here_records_it() -> None:
    for record in (LEARNED, LEARNED.evolve(next_offset=12), LEARNED.evolve(closed=True)):
        catalog = _learned()
        catalog.apply(record.key, encode(record))
        assert KEY not in catalog.unrecorded


def test_a_record_of_a_later_incarnation_records_it_and_a_deletion_forgets_it() -> None:
    catalog = _learned()
    again = RECORDED.evolve(created_at_ms=2_000, next_offset=3)  # short of the tail, made anew
    catalog.apply(again.key, encode(again))
    assert KEY not in catalog.unrecorded
    catalog = _learned()
    catalog.apply(RECORDED.key, None)
    assert len(catalog.unrecorded) == 0


def test_the_echo_of_our_own_record_records_it_and_nothing_else_does() -> None:
    catalog = _learned()
    catalog.echoed(RECORDED.key, encode(RECORDED))  # a checkpoint older than the state here
    catalog.echoed(producer_key("b", "s", "p"), None)
    catalog.echoed(FORMAT_LEVEL_KEY, b'{"level": 7}')
    catalog.echoed(bucket_key("b"), encode(BUCKET))
    assert KEY in catalog.unrecorded
    catalog.echoed(LEARNED.key, encode(LEARNED))
    assert KEY not in catalog.unrecorded
    assert catalog.stream(*KEY) == LEARNED  # an echo is never applied again


def test_short_of_is_the_same_incarnation_behind_in_tail_or_closure() -> None:
    assert short_of(RECORDED, LEARNED)
    assert short_of(LEARNED, LEARNED.evolve(closed=True))
    assert not short_of(LEARNED, LEARNED)
    assert not short_of(RECORDED, LEARNED.evolve(created_at_ms=2_000))
    assert list(Unrecorded([("b", "z"), KEY])) == [KEY, ("b", "z")]


def test_the_catalog_file_keeps_what_is_unrecorded_with_the_rows(tmp_path: Path) -> None:
    """A restart resumes the rows that hold a learned tail: the set goes with them. A file
    written before the set was kept resumes with none; a rebuild from the log has none."""
    store = FileStore(str(tmp_path), "catalog")
    _learned(Catalog(store)).save({"meta": 1}, {"cluster": "c"}, 1234)
    store.close()
    store = FileStore(str(tmp_path), "catalog")
    resumed = Catalog(store)
    resumed.resume()
    assert (list(resumed.unrecorded), resumed.stream(*KEY)) == ([KEY], LEARNED)
    resumed.reset()
    assert len(resumed.unrecorded) == 0
    store.close()
    document = json.loads(Checkpoint({"meta": 1}, {}, 1, (KEY,)).dumps())
    del document["unrecorded"]
    older = Checkpoint.loads(json.dumps(document))
    assert older is not None
    assert older.unrecorded == ()
