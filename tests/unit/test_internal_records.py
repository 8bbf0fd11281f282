"""The internal topics' records: keys as spelled, and values already in Kafka read back as written.

The GOLDEN values are bytes the encoders wrote (the older stream and bucket formats: what
servers wrote before forks, snapshots, fencing tokens, trims, trims' settling points, forks
across buckets and bucket configurations), checked in as literals: a change that reads
or writes them differently fails here, whichever side changed.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import pytest

from adapter.protocol.model import (
    BucketMeta,
    MountMeta,
    ProducerRecord,
    Segment,
    SlotOwner,
    SnapshotPointer,
    StreamMeta,
)
from adapter.state.records import StateRecord, decode, decode_as, encode
from adapter.tier import manifest
from adapter.tier.manifest import TierChunk, TierRange
from topology.internal_records import (
    FORMATS,
    RecordKind,
    bucket_key,
    decode_value,
    knows_format,
    meta_kind,
    producer_of_key,
    range_of_key,
    stream_of_key,
    stream_of_snapshot_key,
)

BUCKET = BucketMeta(
    "shop",
    "dk.bucket.shop",
    3,
    1_700_000_000_000,
    retention_max_age_ms=86_400_000,
    config_version=4,
)
MOUNT = MountMeta(
    "legacy",
    "orders",
    "application/json",
    "application/json; charset=utf-8",
    "utf8",
    True,
    1_700_000_000_001,
)
STREAM = StreamMeta(
    "shop",
    "ünï/cödé",
    2,
    "text/plain",
    1_700_000_000_002,
    40,
    45,
    1_700_000_000_003,
    1_700_000_000_004,
    closed=True,
    ttl_seconds=60,
    last_seq="s-9",
    message_count=5,
    forked_from="root",
    fork_offset=9,
    fork_sub_offset=1,
    inherited=(Segment("root", 3, 9), Segment("mid", 20, 31)),
    retained_from=41,
    fencing_token="writer-7",
    trimmed_to=42,
    trimmed_at_ms=1_700_000_000_005,
    trim_settled_to=40,
    trim_settling_to=41,
    trim_settling_at_ms=1_700_000_000_010,
    source_bucket="src",
    home="src",
)
PLAIN = StreamMeta("shop", "plain", 0, "application/octet-stream", 5, 0, 0, 6, 7)
PRODUCER = ProducerRecord("shop", "a/b", "writer-1", 3, 42, 1_700_000_000_006)
OWNER = SlotOwner(7, "http://10.0.0.7:4437", 1_700_000_000_007)
SNAPSHOT = SnapshotPointer(
    "shop",
    "s",
    41,
    "application/json",
    1234,
    "snapshots/shop/s/41",
    "ab" * 32,
    1_700_000_000_002,
    1_700_000_000_008,
)
RANGE = TierRange(
    "shop",
    "dk.bucket.shop",
    1_700_000_000_000,
    2,
    0,
    100,
    1_700_000_000_009,
    (TierChunk("a/b", "tier/x/0-50", 0, 49, 10, 300, 512), TierChunk("gone", "", 50, 99, 0, 0, 0)),
)

_STREAM_HEAD = (
    b"\x08shop\x18\xc3\xbcn\xc3\xaf/c\xc3\xb6d\xc3\xa9\x04\x14text/plain\x84\xa0\xab\xfe\xf9bPZ"
    b"\x01\x02x\x00\x86\xa0\xab\xfe\xf9b\x88\xa0\xab\xfe\xf9b\x02\x06s-9\n"
)
_FORK_FIELDS = b"\x02\x08root\x02\x12\x02\x04\x08root\x06\x12\x06mid(>\x00\x00"
_TRIM_FIELDS = b"\x02R\x02\x10writer-7\x02T\x02\x8a\xa0\xab\xfe\xf9b"
_BUCKET_HEAD = b"\x08shop\x1cdk.bucket.shop\x06\x80\xa0\xab\xfe\xf9b"
GOLDEN = {
    "bucket": b"\x02" + _BUCKET_HEAD + b"\x02\x80\xf0\xb2R\x08",
    "bucket_v1": b"\x01" + _BUCKET_HEAD,
    "mount": (
        b"\x01\x0clegacy\x0corders application/json\x02>application/json; charset=utf-8"
        b"\x08utf8\x01\x82\xa0\xab\xfe\xf9b"
    ),
    "stream": (
        b"\x06"
        + _STREAM_HEAD
        + _FORK_FIELDS
        + _TRIM_FIELDS
        + b"\x02P\x02R\x02\x94\xa0\xab\xfe\xf9b\x02\x06src\x02\x06src"
    ),
    "plain": (
        b"\x06\x08shop\nplain\x000application/octet-stream\n\x00\x00\x00\x00\x00\x0c\x0e"
        + b"\x00" * 16
    ),
    "stream_v1": b"\x01" + _STREAM_HEAD,
    "stream_v2": b"\x02" + _STREAM_HEAD + _FORK_FIELDS,
    "stream_v3": b"\x03" + _STREAM_HEAD + _FORK_FIELDS + b"\x02R",
    "stream_v4": b"\x04" + _STREAM_HEAD + _FORK_FIELDS + b"\x02R\x02\x10writer-7",
    "stream_v5": b"\x05" + _STREAM_HEAD + _FORK_FIELDS + _TRIM_FIELDS,
    "producer": b"\x01\x08shop\x06a/b\x10writer-1\x06T\x8c\xa0\xab\xfe\xf9b",
    "owner": b"\x01\x0e(http://10.0.0.7:4437\x8e\xa0\xab\xfe\xf9b",
    "snapshot": (
        b"\x01\x08shop\x02sR application/json\xa4\x13&snapshots/shop/s/41\x80\x01"
        + b"ab" * 32
        + b"\x84\xa0\xab\xfe\xf9b\x90\xa0\xab\xfe\xf9b"
    ),
    "range": (
        b"\x01\x08shop\x1cdk.bucket.shop\x80\xa0\xab\xfe\xf9b\x04\x00\xc8\x01\x92\xa0\xab\xfe\xf9b"
        b"\x04\x06a/b\x16tier/x/0-50\x00b\x14\xd8\x04\x80\x08\x08gone\x00d\xc6\x01\x00\x00\x00\x00"
    ),
}
# The fields each older stream format lacked, as they read: their defaults.
BEFORE_SETTLING = {
    "trim_settled_to": None,
    "trim_settling_to": None,
    "trim_settling_at_ms": None,
    "source_bucket": None,
    "home": None,
}
BEFORE_TRIMS = BEFORE_SETTLING | {"trimmed_to": None, "trimmed_at_ms": None}
BEFORE_FENCING = BEFORE_TRIMS | {"fencing_token": None}
BEFORE_SNAPSHOTS = BEFORE_FENCING | {"retained_from": None}
BEFORE_FORKS = BEFORE_SNAPSHOTS | {
    "forked_from": None,
    "fork_offset": None,
    "fork_sub_offset": 0,
    "inherited": (),
    "soft_deleted": False,
}
# Each record kind as written today, with the key it is written under.
CURRENT: list[tuple[str, RecordKind, str, StateRecord]] = [
    ("bucket", RecordKind.BUCKET_META, "bucket:shop", BUCKET),
    ("mount", RecordKind.MOUNT_META, "mount:legacy", MOUNT),
    ("stream", RecordKind.STREAM_META, "stream:shop/ünï/cödé", STREAM),
    ("plain", RecordKind.STREAM_META, "stream:shop/plain", PLAIN),
    ("producer", RecordKind.PRODUCER_STATE, "shop/a/b\x00writer-1", PRODUCER),
    ("owner", RecordKind.SLOT_OWNER, "slot:7", OWNER),
    ("snapshot", RecordKind.SNAPSHOT_POINTER, "snapshot:shop/s", SNAPSHOT),
]
OLDER = [
    ("stream_v1", BEFORE_FORKS),
    ("stream_v2", BEFORE_SNAPSHOTS),
    ("stream_v3", BEFORE_FENCING),
    ("stream_v4", BEFORE_TRIMS),
    ("stream_v5", BEFORE_SETTLING),
]


def _fields(record: StateRecord | TierRange) -> dict[str, Any]:
    """A model record as the plain fields its value decodes to (nested records as dicts)."""
    found = {field.name: getattr(record, field.name) for field in fields(record)}
    if isinstance(record, StreamMeta):
        found["inherited"] = [segment._asdict() for segment in record.inherited]
    if isinstance(record, TierRange):
        found["chunks"] = [vars(chunk) for chunk in record.chunks]
    return found


def _read(record: StateRecord, key: str, value: bytes) -> StateRecord:
    """`value` read back as the adapter does, as a record of `record`'s type."""
    if isinstance(record, ProducerRecord):
        return decode_as(ProducerRecord, key, value)
    if isinstance(record, SlotOwner):
        return decode_as(SlotOwner, key, value)
    if isinstance(record, SnapshotPointer):
        return decode_as(SnapshotPointer, key, value)
    return decode(key, value)  # the meta topic's: the key says which


@pytest.mark.parametrize(("name", "kind", "key", "record"), CURRENT)
def test_each_state_record_is_written_and_read_as_before(
    name: str, kind: RecordKind, key: str, record: StateRecord
) -> None:
    assert encode(record) == GOLDEN[name]
    assert decode_value(kind, GOLDEN[name]) == _fields(record)
    assert _read(record, key, GOLDEN[name]) == record
    assert key == (bucket_key("shop") if isinstance(record, BucketMeta) else record.key)


@pytest.mark.parametrize(("name", "defaults"), OLDER)
def test_older_stream_records_read_with_their_new_fields_defaulted(
    name: str, defaults: dict[str, Any]
) -> None:
    expected = STREAM.evolve(**defaults)
    assert decode(STREAM.key, GOLDEN[name]) == expected
    assert decode_value(RecordKind.STREAM_META, GOLDEN[name]) == _fields(expected)


def test_an_older_bucket_record_reads_without_a_configuration() -> None:
    expected = replace(BUCKET, retention_max_age_ms=None, config_version=0)
    assert decode("bucket:shop", GOLDEN["bucket_v1"]) == expected
    assert decode_value(RecordKind.BUCKET_META, GOLDEN["bucket_v1"]) == _fields(expected)


def test_a_tier_range_is_written_and_read_as_before() -> None:
    assert manifest.encode(RANGE) == GOLDEN["range"]
    assert decode_value(RecordKind.TIER_RANGE, GOLDEN["range"]) == _fields(RANGE)
    assert manifest.decode(RANGE.key, GOLDEN["range"]) == RANGE


def test_keys_read_back() -> None:
    assert [meta_kind(key) for key in ("bucket:shop", "mount:legacy", STREAM.key)] == [
        RecordKind.BUCKET_META,
        RecordKind.MOUNT_META,
        RecordKind.STREAM_META,
    ]
    assert [stream_of_key(key) for key in ("bucket:shop", "mount:legacy", STREAM.key)] == [
        ("shop", ""),
        ("legacy", ""),
        ("shop", "ünï/cödé"),
    ]
    assert producer_of_key(PRODUCER.key) == ("shop", "a/b", "writer-1")
    assert stream_of_snapshot_key("snapshot:shop/a/b") == ("shop", "a/b")
    assert RANGE.key == "range:dk.bucket.shop/1700000000000/2/00000000000000000000"
    assert range_of_key(RANGE.key) == ("dk.bucket.shop", 1_700_000_000_000, 2, 0)


def test_only_the_stream_and_bucket_metadata_have_older_formats() -> None:
    changed = {kind for kind, formats in FORMATS.items() if len(formats) > 1}
    assert changed == {RecordKind.STREAM_META, RecordKind.BUCKET_META}
    assert knows_format(RecordKind.STREAM_META, GOLDEN["stream_v1"])
    assert not knows_format(RecordKind.MOUNT_META, b"\x02" + GOLDEN["mount"][1:])


@pytest.mark.parametrize("kind", list(RecordKind))
def test_an_unknown_format_byte_is_refused_not_guessed(kind: RecordKind) -> None:
    with pytest.raises(ValueError, match="'k' has an unknown format byte"):
        decode_value(kind, b"\x09" + GOLDEN["bucket"][1:], "k")
