"""The catalog: the log applied in order, echoes of our own commits known by their offsets."""

from __future__ import annotations

import io
from dataclasses import replace

import fastavro

import schemas
from adapter.protocol.model import (
    RELEASED,
    BucketMeta,
    ProducerRecord,
    Segment,
    SlotOwner,
    SnapshotPointer,
    StreamMeta,
)
from adapter.state.catalog import Catalog, newer
from adapter.state.records import decode, encode
from topology.internal_records import (
    FORMAT_V1,
    FORMAT_V2,
    FORMAT_V3,
    FORMAT_V4,
    FORMAT_V5,
    FORMAT_V6,
    bucket_key,
)

BUCKET = BucketMeta("b", "dk.bucket.b", 3, 1)
META = StreamMeta("b", "s", 1, "text/plain", 100, 0, 5, 1_000, 1_000, ttl_seconds=60)
V1_FIELDS = {field["name"] for field in schemas.load("stream_meta_v1")["fields"]}
V2_FIELDS = {field["name"] for field in schemas.load("stream_meta_v2")["fields"]}
V3_FIELDS = {field["name"] for field in schemas.load("stream_meta_v3")["fields"]}
V4_FIELDS = {field["name"] for field in schemas.load("stream_meta_v4")["fields"]}
V5_FIELDS = {field["name"] for field in schemas.load("stream_meta_v5")["fields"]}


def _catalog() -> Catalog:
    catalog = Catalog()
    catalog.put_bucket(BUCKET)
    return catalog


def test_records_are_applied_in_log_order() -> None:
    catalog = _catalog()
    catalog.apply(META.key, encode(META))
    assert catalog.stream("b", "s") == META
    catalog.apply(META.key, None)
    assert catalog.stream("b", "s") is None


def test_an_echo_of_an_older_state_never_undoes_a_newer_one() -> None:
    catalog = _catalog()
    current = META.evolve(next_offset=9, last_access_ms=5_000)
    catalog.put_stream(current)
    catalog.apply(META.key, encode(META))
    assert catalog.stream("b", "s") == current
    later = META.evolve(next_offset=12, last_access_ms=500)
    catalog.apply(META.key, encode(later))
    assert catalog.stream("b", "s") == later.evolve(last_access_ms=5_000)


def test_producer_states_survive_any_replay_order_of_the_two_topics() -> None:
    """Delete, re-create and a new producer: the producers topic may be replayed first."""
    recreated = META.evolve(created_at_ms=200, next_offset=20)
    new_state = ProducerRecord("b", "s", "p", 0, 0, 2)
    for order in ("producers first", "meta first"):
        catalog = _catalog()
        producers = [(new_state.key, None), (new_state.key, encode(new_state))]
        meta = [(META.key, encode(META)), (META.key, None), (META.key, encode(recreated))]
        if order == "producers first":
            for key, value in producers:
                catalog.apply_producer(key, value)
        for key, value in meta:
            catalog.apply(key, value)
        if order == "meta first":
            for key, value in producers:
                catalog.apply_producer(key, value)
        assert catalog.stream("b", "s") == recreated, order
        assert catalog.producers("b", "s") == {"p": new_state}, order


def test_a_producer_record_behind_the_state_known_never_undoes_it() -> None:
    """A checkpoint's producer record followed after the stream's own records carried the
    producer further here (a new slot owner resumes from the tail known here)."""
    catalog = _catalog()
    carried = ProducerRecord("b", "s", "p", 0, 9, 2)
    catalog.put_producer(carried)
    checkpointed = ProducerRecord("b", "s", "p", 0, 4, 1)
    catalog.apply_producer(checkpointed.key, encode(checkpointed))
    assert catalog.producers("b", "s") == {"p": carried}
    new_epoch = ProducerRecord("b", "s", "p", 1, 0, 3)
    catalog.apply_producer(new_epoch.key, encode(new_epoch))
    assert catalog.producers("b", "s") == {"p": new_epoch}


def test_a_deletion_forgets_producers_only_when_made_here() -> None:
    catalog = _catalog()
    catalog.put_stream(META)
    catalog.put_producer(ProducerRecord("b", "s", "p", 0, 4, 1))
    catalog.apply(META.key, None)  # from the log: the producers topic has its own tombstones
    assert catalog.producers("b", "s") != {}
    catalog.put_stream(META)
    catalog.drop_stream("b", "s")  # a deletion committed here
    assert catalog.producers("b", "s") == {}


def test_newer_keeps_the_later_access_and_never_goes_back() -> None:
    renewed = META.evolve(last_access_ms=9_000)
    assert newer(renewed, META.evolve(next_offset=7)).last_access_ms == 9_000
    assert newer(renewed, META.evolve(next_offset=2)) == renewed
    closed = META.evolve(closed=True)
    assert newer(closed, META) == closed
    recreated = META.evolve(created_at_ms=200, next_offset=1)
    assert newer(renewed, recreated) is recreated
    assert newer(None, META) is META


def test_a_record_short_of_the_tail_known_brings_its_other_changes() -> None:
    """A tail learned from the stream's own records stays; a trim or fence recorded before
    it, followed later, still applies."""
    known = META.evolve(next_offset=9, message_count=9, last_seq="x", closed=True)
    trimmed = META.evolve(next_offset=7, trimmed_to=3, fencing_token="f")
    merged = newer(known, trimmed)
    assert (merged.next_offset, merged.message_count, merged.last_seq) == (9, 9, "x")
    assert merged.closed
    assert (merged.trimmed_to, merged.fencing_token) == (3, "f")


def test_the_latest_owner_record_of_a_slot_wins() -> None:
    catalog = Catalog()
    assert catalog.owner(3) is None
    for url in ("http://a:1", "http://b:1"):
        record = SlotOwner(3, url, 1)
        catalog.apply_owner(record.key, encode(record))
    assert catalog.owner(3) == "http://b:1"


def test_a_released_slot_has_no_owner_and_a_newer_mark() -> None:
    """An owner's release of its slot at a clean hand-over: no owner to forward to until the
    next one's record, and the mark moves on (a forwarder waiting on a write it sent learns
    its outcome from the log)."""
    catalog = Catalog()
    for offset, url in ((4, "http://a:1"), (9, RELEASED)):
        record = SlotOwner(3, url, 1)
        catalog.apply_owner(record.key, encode(record), offset)
    assert catalog.owner(3) is None
    assert catalog.owner_mark(3) == 9
    assert catalog.owner_urls() == set()


def test_a_stream_applied_before_its_bucket_is_listed() -> None:
    """Compaction keeps a bucket record rewritten after its streams' (two instances creating
    it on demand), so a replay can meet the stream first."""
    catalog = Catalog()
    catalog.apply(META.key, encode(META))
    catalog.apply(bucket_key("b"), encode(BUCKET))
    assert list(catalog.stream_ids("b", "", None)) == ["s"]
    assert catalog.stream_count("b") == 1


def test_membership_is_the_same_in_any_replay_order() -> None:
    other = META.evolve(stream_id="r")
    records = [
        (bucket_key("b"), encode(BUCKET)),
        (META.key, encode(META)),
        (other.key, encode(other)),
    ]
    orders = [records, records[::-1], [records[1], records[0], records[2]]]
    for order in orders:
        catalog = Catalog()
        for key, value in order:
            catalog.apply(key, value)
        assert list(catalog.stream_ids("b", "", None)) == ["r", "s"]


def test_a_bucket_record_rewritten_keeps_its_streams() -> None:
    catalog = _catalog()
    catalog.put_stream(META)
    catalog.apply(bucket_key("b"), encode(replace(BUCKET, created_at_ms=2)))
    assert catalog.stream_count("b") == 1
    catalog.drop_bucket("b")  # a bucket tombstone: streams go only with their own
    assert catalog.stream_count("b") == 1
    catalog.drop_stream("b", "s")
    assert (catalog.stream_count("b"), list(catalog.stream_ids("b", "", None))) == (0, [])
    assert catalog.bucket_ids() == []


def test_forks_are_indexed_by_source_in_any_replay_order() -> None:
    fork = replace(META, stream_id="f", forked_from="s", inherited=(Segment("s", 0, 3),))
    for order in ((META, fork), (fork, META)):
        catalog = _catalog()
        for meta in order:
            catalog.apply(meta.key, encode(meta))
        assert catalog.forks_of("b", "s") == [fork]
        catalog.apply(fork.key, None)
        assert catalog.forks_of("b", "s") == []


def test_a_stream_record_written_before_forks_reads_with_their_defaults() -> None:
    out = io.BytesIO()
    out.write(FORMAT_V1)
    old = {k: v for k, v in vars(META).items() if k in V1_FIELDS}
    fastavro.schemaless_writer(out, fastavro.parse_schema(schemas.load("stream_meta_v1")), old)
    decoded = decode(META.key, out.getvalue())
    assert decoded == META
    assert (decoded.inherited, decoded.forked_from, decoded.soft_deleted) == ((), None, False)
    assert encode(META)[:1] == FORMAT_V6


def test_a_stream_record_written_before_snapshots_reads_with_no_retention() -> None:
    out = io.BytesIO()
    out.write(FORMAT_V2)
    old = {k: v for k, v in vars(META).items() if k in V2_FIELDS}
    old["inherited"] = []
    fastavro.schemaless_writer(out, fastavro.parse_schema(schemas.load("stream_meta_v2")), old)
    decoded = decode(META.key, out.getvalue())
    assert decoded == META
    assert decoded.retained_from is None


def test_a_stream_record_written_before_fencing_tokens_reads_with_none() -> None:
    out = io.BytesIO()
    out.write(FORMAT_V3)
    old = {k: v for k, v in vars(META).items() if k in V3_FIELDS}
    old["inherited"] = []
    fastavro.schemaless_writer(out, fastavro.parse_schema(schemas.load("stream_meta_v3")), old)
    decoded = decode(META.key, out.getvalue())
    assert decoded == META
    assert decoded.fencing_token is None


def test_a_stream_record_written_before_trims_reads_as_never_trimmed() -> None:
    out = io.BytesIO()
    out.write(FORMAT_V4)
    old = {k: v for k, v in vars(META).items() if k in V4_FIELDS}
    old["inherited"] = []
    fastavro.schemaless_writer(out, fastavro.parse_schema(schemas.load("stream_meta_v4")), old)
    decoded = decode(META.key, out.getvalue())
    assert decoded == META
    assert (decoded.trimmed_to, decoded.trimmed_at_ms) == (None, None)


def test_a_stream_record_written_before_forks_across_buckets_lives_in_its_own_bucket() -> None:
    out = io.BytesIO()
    out.write(FORMAT_V5)
    old = {k: v for k, v in vars(META).items() if k in V5_FIELDS}
    old["inherited"] = []
    fastavro.schemaless_writer(out, fastavro.parse_schema(schemas.load("stream_meta_v5")), old)
    decoded = decode(META.key, out.getvalue())
    assert decoded == META
    assert (decoded.source_bucket, decoded.home, decoded.data_bucket) == (None, None, "b")


def test_a_fork_across_buckets_survives_its_encoding_and_is_found_from_both_sides() -> None:
    fork = META.evolve(
        bucket_id="c", forked_from="s", source_bucket="b", home="b", inherited=(Segment("s", 0, 3),)
    )
    assert decode(fork.key, encode(fork)) == fork
    catalog = _catalog()
    catalog.put_stream(META)
    catalog.apply(fork.key, encode(fork))
    assert catalog.forks_of("b", "s") == [fork]
    assert catalog.housed_in("b") == [fork]
    assert (catalog.forks_of("c", "s"), catalog.housed_in("c")) == ([], [])
    catalog.apply(fork.key, None)
    assert (catalog.forks_of("b", "s"), catalog.housed_in("b")) == ([], [])


def test_a_topics_streams_are_those_whose_records_it_holds_not_those_of_its_bucket() -> None:
    own = META.evolve(bucket_id="c", stream_id="own")
    fork = META.evolve(
        bucket_id="c", forked_from="s", source_bucket="b", home="b", inherited=(Segment("s", 0, 3),)
    )
    catalog = _catalog()
    for meta in (META, own, fork):
        catalog.put_stream(meta)
    assert [meta for meta, _ in catalog.streams_in_topic("b")] == [META, fork]
    assert [meta for meta, _ in catalog.streams_in_topic("c")] == [own]
    assert [meta for meta, _ in catalog.streams_of("c")] == [own, fork]


def test_a_trim_survives_its_encoding() -> None:
    trimmed = META.evolve(trimmed_to=3, trimmed_at_ms=1_234)
    assert decode(trimmed.key, encode(trimmed)) == trimmed


def test_a_fencing_token_survives_its_encoding() -> None:
    fenced = META.evolve(fencing_token="writer-7")
    assert decode(fenced.key, encode(fenced)) == fenced


def test_the_visible_snapshot_is_the_one_the_stream_retains_from() -> None:
    catalog = _catalog()
    pointer = SnapshotPointer("b", "s", 5, "text/plain", 3, "k", "00", META.created_at_ms, 1)
    catalog.apply_snapshot(pointer.key, encode(pointer))
    assert catalog.snapshot(META) is None  # the stream does not retain from 5
    retaining = META.evolve(retained_from=5)
    assert catalog.snapshot(retaining) == pointer
    assert catalog.snapshot(retaining.evolve(created_at_ms=9)) is None  # an earlier stream's
    catalog.apply_snapshot(pointer.key, None)
    assert catalog.snapshot(retaining) is None


def test_a_bucket_record_written_before_configurations_reads_with_none() -> None:
    out = io.BytesIO()
    out.write(FORMAT_V1)
    fastavro.schemaless_writer(
        out, fastavro.parse_schema(schemas.load("bucket_meta_v1")), vars(BUCKET)
    )
    decoded = decode(bucket_key("b"), out.getvalue())
    assert decoded == BUCKET
    assert isinstance(decoded, BucketMeta)
    assert (decoded.retention_max_age_ms, decoded.config_version) == (None, 0)


def test_a_bucket_configuration_survives_its_encoding() -> None:
    configured = replace(BUCKET, retention_max_age_ms=2_000, config_version=3)
    assert encode(configured)[:1] == FORMAT_V2
    assert decode(bucket_key("b"), encode(configured)) == configured


def test_a_stream_record_written_before_settling_points_reads_with_none() -> None:
    trimmed = META.evolve(trimmed_to=4, trimmed_at_ms=900)
    out = io.BytesIO()
    out.write(FORMAT_V5)
    old = {k: v for k, v in vars(trimmed).items() if k in V5_FIELDS}
    old["inherited"] = []
    fastavro.schemaless_writer(out, fastavro.parse_schema(schemas.load("stream_meta_v5")), old)
    decoded = decode(META.key, out.getvalue())
    assert decoded == trimmed
    assert (decoded.trim_settled_to, decoded.trim_settling_to) == (None, None)


def test_settling_points_survive_their_encoding() -> None:
    trimmed = META.evolve(
        trimmed_to=4,
        trimmed_at_ms=900,
        trim_settled_to=2,
        trim_settling_to=3,
        trim_settling_at_ms=800,
    )
    assert decode(META.key, encode(trimmed)) == trimmed
