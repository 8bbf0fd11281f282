"""The catalog applying other instances' followed changes, and skipping its own echoes."""

from __future__ import annotations

from dataclasses import replace

from adapter.state.catalog import Catalog, newer
from adapter.state.records import BucketMeta, ProducerRecord, SlotOwner, StreamMeta, encode

BUCKET = BucketMeta("b", "dk.bucket.b", 3, 1)
META = StreamMeta("b", "s", 1, "text/plain", 100, 0, 5, 1_000, 1_000, ttl_seconds=60)


def _remote(_bucket: str, _partition: int) -> bool:
    return False


def _local(_bucket: str, _partition: int) -> bool:
    return True


def _catalog() -> Catalog:
    catalog = Catalog()
    catalog.put_bucket(BUCKET)
    return catalog


def test_a_remote_change_is_applied() -> None:
    catalog = _catalog()
    catalog.apply_remote(META.key, encode(META), _remote)
    assert catalog.stream("b", "s") == META
    catalog.apply_remote(META.key, None, _remote)
    assert catalog.stream("b", "s") is None


def test_an_echo_of_our_own_write_does_not_undo_what_came_after() -> None:
    catalog = _catalog()
    current = META.evolve(next_offset=9, last_access_ms=5_000)
    catalog.put_stream(current)
    catalog.apply_remote(META.key, encode(META), _local)
    assert catalog.stream("b", "s") == current
    catalog.apply_remote(META.key, None, _local)  # our own delete was applied already
    assert catalog.stream("b", "s") == current


def test_a_later_state_of_a_local_slot_is_caught_up_with() -> None:
    catalog = _catalog()
    catalog.put_stream(META)
    later = META.evolve(next_offset=8, last_access_ms=500)
    catalog.apply_remote(META.key, encode(later), _local)
    assert catalog.stream("b", "s") == later.evolve(last_access_ms=1_000)


def test_newer_keeps_the_later_access_and_never_goes_back() -> None:
    renewed = META.evolve(last_access_ms=9_000)
    assert newer(renewed, META.evolve(next_offset=7)).last_access_ms == 9_000
    assert newer(renewed, META.evolve(next_offset=2)) is renewed
    closed = META.evolve(closed=True)
    assert newer(closed, META) is closed
    recreated = META.evolve(created_at_ms=200, next_offset=1)
    assert newer(renewed, recreated) is recreated
    assert newer(None, META) is META


def test_producer_state_only_moves_forward() -> None:
    catalog = _catalog()
    catalog.put_stream(META)
    state = ProducerRecord("b", "s", "p", 0, 4, 1)
    catalog.apply_remote_producer(state.key, encode(state), _remote)
    older = ProducerRecord("b", "s", "p", 0, 2, 1)
    catalog.apply_remote_producer(older.key, encode(older), _remote)
    assert catalog.producers("b", "s")["p"] == state
    catalog.apply_remote_producer(state.key, None, _local)  # our own: already applied
    assert catalog.producers("b", "s")["p"] == state
    catalog.apply_remote_producer(state.key, None, _remote)
    assert catalog.producers("b", "s") == {}


def test_bucket_records_are_applied_by_everyone() -> None:
    catalog = Catalog()
    catalog.apply_remote("bucket:b", encode(BUCKET), _local)
    assert catalog.bucket("b") == BUCKET


def test_the_latest_owner_record_of_a_slot_wins() -> None:
    catalog = Catalog()
    assert catalog.owner(3) is None
    for url in ("http://a:1", "http://b:1"):
        record = SlotOwner(3, url, 1)
        catalog.apply_owner(record.key, encode(record))
    assert catalog.owner(3) == "http://b:1"


def test_a_stream_applied_before_its_bucket_is_listed() -> None:
    """Compaction keeps a bucket record rewritten after its streams' (two instances creating
    it on demand), so a replay can meet the stream first."""
    catalog = Catalog()
    catalog.apply(META.key, encode(META))
    catalog.apply("bucket:b", encode(BUCKET))
    assert list(catalog.stream_ids("b", "", None)) == ["s"]
    assert catalog.stream_count("b") == 1


def test_membership_is_the_same_in_any_replay_order() -> None:
    other = META.evolve(stream_id="r")
    records = [("bucket:b", encode(BUCKET)), (META.key, encode(META)), (other.key, encode(other))]
    orders = [records, records[::-1], [records[1], records[0], records[2]]]
    for order in orders:
        catalog = Catalog()
        for key, value in order:
            catalog.apply(key, value)
        assert list(catalog.stream_ids("b", "", None)) == ["r", "s"]


def test_a_bucket_record_rewritten_keeps_its_streams() -> None:
    catalog = _catalog()
    catalog.put_stream(META)
    catalog.apply_remote("bucket:b", encode(replace(BUCKET, created_at_ms=2)), _remote)
    assert catalog.stream_count("b") == 1
    catalog.drop_bucket("b")  # a bucket tombstone: streams go only with their own
    assert catalog.stream_count("b") == 1
    catalog.drop_stream("b", "s")
    assert (catalog.stream_count("b"), list(catalog.stream_ids("b", "", None))) == (0, [])
    assert catalog.bucket_ids() == []
