"""The records of the compacted internal topics: how their keys are spelled, the format byte
that leads each value, and which Avro schema (`schemas/*.avsc`) each format was written with.

This module is their one home. The adapter stores and replays its state through it
(`adapter/state/records.py`, `adapter/tier/manifest.py`) and `spark_streaming` reads the meta
and tier topics with it, so the two cannot drift apart. A value decodes to a plain dict of its
current schema's fields: the adapter builds its model from it, Spark keeps what it needs.

A value is one format byte, then the record in Avro's binary encoding without a header
(schemaless). The byte names the schema the record was written with, so a schema can change
while records of the older one stay in a compacted topic: they are read with the current schema
as the reader's, their new fields taking its defaults. Only stream and bucket metadata have
changed so far. Which format each kind is written in follows the format level in force
(`LEVELS`), so instances of the previous release keep reading what a newer one writes.

The keys (a compacted topic keeps each key's last value; a null value is a tombstone):
- meta: `bucket:{bucket}`, `mount:{bucket}`, `stream:{bucket}/{stream}`, and `format-level:`
  (the format level in force: see `FORMAT_LEVEL_KEY`);
- producers: `{bucket}/{stream}` NUL `{producer id}`;
- snapshots: `snapshot:{bucket}/{stream}`;
- owners: `slot:{slot}`;
- tier: `range:{topic}/{bucket created_at_ms}/{partition}/{start, 20 digits}`.
Bucket ids never contain '/', so the first '/' ends the bucket id even when stream ids have one.

It imports the standard library only; fastavro is loaded by the first encode or decode, so the
protocol's model, which names its records' keys here, loads no codec, and each schema is
parsed once, when first used (a Spark job parses only those it reads).
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from enum import StrEnum
from functools import cache
from typing import Any, Final

import schemas


class RecordKind(StrEnum):
    """What an internal record holds; the value is the name of its current schema."""

    BUCKET_META = "bucket_meta"
    MOUNT_META = "mount_meta"
    STREAM_META = "stream_meta"
    PRODUCER_STATE = "producer_state"
    SLOT_OWNER = "slot_owner"
    SNAPSHOT_POINTER = "snapshot_pointer"
    TIER_RANGE = "tier_range"


FORMAT_V1: Final = b"\x01"
# StreamMeta with fork fields; BucketMeta with its configuration (age retention).
FORMAT_V2: Final = b"\x02"
# StreamMeta with `retained_from`.
FORMAT_V3: Final = b"\x03"
# StreamMeta with `fencing_token`.
FORMAT_V4: Final = b"\x04"
# StreamMeta with `trimmed_to` and `trimmed_at_ms`.
FORMAT_V5: Final = b"\x05"
# StreamMeta with its trim's settling points, `source_bucket` and `home`.
FORMAT_V6: Final = b"\x06"

# Each kind's format bytes with the schema they were written with, oldest first; the last is
# what is written now.
FORMATS: Final[Mapping[RecordKind, Mapping[bytes, str]]] = {
    kind: {FORMAT_V1: kind.value} for kind in RecordKind
} | {
    RecordKind.STREAM_META: {
        FORMAT_V1: "stream_meta_v1",  # before forks
        FORMAT_V2: "stream_meta_v2",  # before snapshots
        FORMAT_V3: "stream_meta_v3",  # before fencing tokens
        FORMAT_V4: "stream_meta_v4",  # before trims
        FORMAT_V5: "stream_meta_v5",  # before settling points and forks across buckets
        FORMAT_V6: "stream_meta",
    },
    RecordKind.BUCKET_META: {
        FORMAT_V1: "bucket_meta_v1",  # before bucket configurations
        FORMAT_V2: "bucket_meta",
    },
}
WRITTEN: Final[Mapping[RecordKind, bytes]] = {
    kind: list(formats)[-1] for kind, formats in FORMATS.items()
}

# Format levels, as Kafka's `metadata.version`: each names the format every kind is written in,
# and what is written. A version reads every level up to `NEWEST_LEVEL` and can write the one
# before it (`PREVIOUS_LEVEL`, what the release before writes), so a deployment can be rolled one
# instance at a time: it keeps writing the previous level until every instance says it reads the
# newest (`adapter/state/format_gate.py`). An instance that predates levels says nothing and is
# taken to read `PREVIOUS_LEVEL`.
# Level 6: StreamMeta 0x06, BucketMeta 0x02: every field of the model (`ALL_FIELDS_LEVEL`).
# Level 7: the same formats; a pure append commits its data record alone, its stream's state
# written by the slot's checkpoint (`APPENDS_ALONE_LEVEL`). A reader of level 6 takes a stream's
# tail from the meta topic, which no longer follows every append.
ALL_FIELDS_LEVEL: Final = 6
APPENDS_ALONE_LEVEL: Final = 7
PREVIOUS_LEVEL: Final = 6
NEWEST_LEVEL: Final = 7
LEVELS: Final[Mapping[int, Mapping[RecordKind, bytes]]] = {
    5: dict(WRITTEN) | {RecordKind.STREAM_META: FORMAT_V5, RecordKind.BUCKET_META: FORMAT_V1},
    ALL_FIELDS_LEVEL: WRITTEN,
    APPENDS_ALONE_LEVEL: WRITTEN,
}
# Fields level 5's schemas lack whose values a record must not lose (a fork across buckets, a
# bucket's age retention): such records are refused until `ALL_FIELDS_LEVEL` is in force.
# Other new fields (a trim's settling points) only make storage freeing more eager and are
# dropped.
KEPT_FIELDS: Final[Mapping[RecordKind, tuple[str, ...]]] = {
    RecordKind.STREAM_META: ("source_bucket", "home"),
    RecordKind.BUCKET_META: ("retention_max_age_ms",),
}


def level_of(kind: RecordKind, value: bytes) -> int:
    """The lowest format level that writes `value`'s format byte (older bytes: the oldest)."""
    for level in sorted(LEVELS):
        if value[:1] <= LEVELS[level][kind]:
            return level
    return NEWEST_LEVEL


def lost_fields(kind: RecordKind, record: Mapping[str, Any], level: int) -> list[str]:
    """The fields of `record` that `level`'s format of `kind` cannot hold and that are set."""
    if level >= ALL_FIELDS_LEVEL:
        return []
    return [name for name in KEPT_FIELDS.get(kind, ()) if record.get(name) is not None]


def encode_value(kind: RecordKind, record: Mapping[str, Any], level: int = NEWEST_LEVEL) -> bytes:
    """The value of a record of `kind`: the format byte `level` writes, then `record` in that
    format's schema (fields it lacks are left out: see `lost_fields`)."""
    import fastavro  # here, not at the top: see the module's last paragraph

    written = LEVELS[level][kind]
    out = io.BytesIO()
    out.write(written)
    fastavro.schemaless_writer(out, _parsed(FORMATS[kind][written]), record)
    return out.getvalue()


def decode_value(kind: RecordKind, value: bytes, key: str = "") -> dict[str, Any]:
    """The fields of a value of `kind` written in any of its formats, in its current schema;
    ValueError for a format byte it never had (`key` names the record in the message)."""
    import fastavro

    writer = FORMATS[kind].get(value[:1])
    if writer is None:
        raise ValueError(f"{kind.value} record {key!r} has an unknown format byte")
    reader = None if writer == kind.value else _parsed(kind.value)
    record = fastavro.schemaless_reader(io.BytesIO(value[1:]), _parsed(writer), reader)
    if not isinstance(record, dict):
        raise ValueError(f"{kind.value} record {key!r} is not a record")
    return record


def knows_format(kind: RecordKind, value: bytes) -> bool:
    """Whether `value` starts with a format byte of `kind`."""
    return value[:1] in FORMATS[kind]


@cache
def _parsed(name: str) -> Any:
    import fastavro

    return fastavro.parse_schema(schemas.load(name))


# The meta topic: buckets, mounted topics and streams.


def bucket_key(bucket_id: str) -> str:
    return f"bucket:{bucket_id}"


def mount_key(bucket_id: str) -> str:
    return f"mount:{bucket_id}"


def stream_meta_key(bucket_id: str, stream_id: str) -> str:
    """A stream's key in the meta topic (its records' key in its partition: `wire.stream_key`)."""
    return f"stream:{bucket_id}/{stream_id}"


# The format level in force, written by `durable-kafka upgrade finalize` only (a record an
# instance that predates levels could not read): a JSON object `{"level": N}`, no format byte.
FORMAT_LEVEL_KEY: Final = "format-level:"


def meta_kind(key: str) -> RecordKind:
    """What a meta-topic key's record holds. `FORMAT_LEVEL_KEY` holds none of these kinds: a
    reader of every meta record checks for it first (`adapter/state/catalog.py`)."""
    if key.startswith("bucket:"):
        return RecordKind.BUCKET_META
    if key.startswith("mount:"):
        return RecordKind.MOUNT_META
    return RecordKind.STREAM_META


def stream_of_key(key: str) -> tuple[str, str]:
    """(bucket_id, stream_id) of a `stream:` meta key; a `bucket:` or `mount:` key gives
    (bucket_id, "")."""
    kind, _, rest = key.partition(":")
    if kind in ("bucket", "mount"):
        return rest, ""
    bucket_id, _, stream_id = rest.partition("/")
    return bucket_id, stream_id


# The producers, snapshots and owners topics.


def producer_key(bucket_id: str, stream_id: str, producer_id: str) -> str:
    # Stream ids never contain NUL, and HTTP header values (producer ids) cannot either.
    return f"{bucket_id}/{stream_id}\x00{producer_id}"


def producer_of_key(key: str) -> tuple[str, str, str]:
    """(bucket_id, stream_id, producer_id) of a producers-topic key."""
    stream, _, producer_id = key.partition("\x00")
    bucket_id, _, stream_id = stream.partition("/")
    return bucket_id, stream_id, producer_id


def snapshot_key(bucket_id: str, stream_id: str) -> str:
    return f"snapshot:{bucket_id}/{stream_id}"


def stream_of_snapshot_key(key: str) -> tuple[str, str]:
    """(bucket_id, stream_id) of a snapshots-topic key."""
    bucket_id, _, stream_id = key.removeprefix("snapshot:").partition("/")
    return bucket_id, stream_id


def owner_key(slot: int) -> str:
    return f"slot:{slot}"


# The tier topic.

_RANGE_PREFIX: Final = "range:"


def range_key(topic: str, epoch_ms: int, partition: int, start: int) -> str:
    """A tiered range's key: its bucket topic, that bucket's created_at_ms, partition, start."""
    return f"{_RANGE_PREFIX}{topic}/{epoch_ms}/{partition}/{start:020d}"


def range_of_key(key: str) -> tuple[str, int, int, int]:
    """(topic, epoch_ms, partition, start) of a tier-topic key."""
    rest, _, start = key.removeprefix(_RANGE_PREFIX).rpartition("/")
    rest, _, partition = rest.rpartition("/")
    topic, _, epoch_ms = rest.rpartition("/")
    return topic, int(epoch_ms), int(partition), int(start)
