"""The Avro encoding of the state records in the compacted state topics. The records themselves
(bucket and stream metadata, producer states, slot owners, snapshot pointers) and their keys are
the protocol's model (`adapter/protocol/model.py`), re-exported for the layers that store them."""

from __future__ import annotations

import io
from dataclasses import fields
from typing import Any, TypeVar

import fastavro

import schemas
from adapter.protocol.model import (
    BucketMeta,
    MountMeta,
    ProducerRecord,
    Segment,
    SlotOwner,
    SnapshotPointer,
    StreamMeta,
    bucket_key,
    mount_key,
    producer_key,
    snapshot_key,
    stream_key,
    stream_of_key,
)

__all__ = [
    "FORMAT_V1",
    "FORMAT_V2",
    "FORMAT_V3",
    "FORMAT_V4",
    "FORMAT_V5",
    "FORMAT_V6",
    "BucketMeta",
    "MountMeta",
    "ProducerRecord",
    "Segment",
    "SlotOwner",
    "SnapshotPointer",
    "StateRecord",
    "StreamMeta",
    "bucket_key",
    "decode",
    "decode_as",
    "encode",
    "mount_key",
    "producer_key",
    "snapshot_key",
    "stream_key",
    "stream_of_key",
]

# One leading byte names the encoding, so a later schema change can be read beside this one.
FORMAT_V1 = b"\x01"
# StreamMeta with fork fields; its 0x01 records are read through `stream_meta_v1.avsc`.
FORMAT_V2 = b"\x02"
# StreamMeta with `retained_from`; its 0x02 records are read through `stream_meta_v2.avsc`.
FORMAT_V3 = b"\x03"
# StreamMeta with `fencing_token`; its 0x03 records are read through `stream_meta_v3.avsc`.
FORMAT_V4 = b"\x04"
# StreamMeta with `trimmed_to` and `trimmed_at_ms`; its 0x04 records are read through
# `stream_meta_v4.avsc`.
FORMAT_V5 = b"\x05"
# StreamMeta with its trim's settling points, `source_bucket` and `home`; its 0x05 records
# are read through `stream_meta_v5.avsc`.
FORMAT_V6 = b"\x06"
# BucketMeta is written with FORMAT_V2 since it holds its configuration (age retention); its
# 0x01 records are read through `bucket_meta_v1.avsc`.
_CURRENT = {StreamMeta: FORMAT_V6, BucketMeta: FORMAT_V2}


_PARSED = {
    BucketMeta: fastavro.parse_schema(schemas.load("bucket_meta")),
    StreamMeta: fastavro.parse_schema(schemas.load("stream_meta")),
    ProducerRecord: fastavro.parse_schema(schemas.load("producer_state")),
    SlotOwner: fastavro.parse_schema(schemas.load("slot_owner")),
    SnapshotPointer: fastavro.parse_schema(schemas.load("snapshot_pointer")),
    MountMeta: fastavro.parse_schema(schemas.load("mount_meta")),
}

_OLDER: dict[type, dict[bytes, Any]] = {
    StreamMeta: {
        FORMAT_V1: fastavro.parse_schema(schemas.load("stream_meta_v1")),
        FORMAT_V2: fastavro.parse_schema(schemas.load("stream_meta_v2")),
        FORMAT_V3: fastavro.parse_schema(schemas.load("stream_meta_v3")),
        FORMAT_V4: fastavro.parse_schema(schemas.load("stream_meta_v4")),
        FORMAT_V5: fastavro.parse_schema(schemas.load("stream_meta_v5")),
    },
    BucketMeta: {FORMAT_V1: fastavro.parse_schema(schemas.load("bucket_meta_v1"))},
}

StateRecord = BucketMeta | StreamMeta | ProducerRecord | SlotOwner | SnapshotPointer | MountMeta


def encode(record: StateRecord) -> bytes:
    out = io.BytesIO()
    data = vars(record)  # scalars, without asdict's deep copy
    out.write(_CURRENT.get(type(record), FORMAT_V1))
    if isinstance(record, StreamMeta):
        data = data | {"inherited": [segment._asdict() for segment in record.inherited]}
    fastavro.schemaless_writer(out, _PARSED[type(record)], data)
    return out.getvalue()


R = TypeVar("R", BucketMeta, StreamMeta, ProducerRecord, SlotOwner, SnapshotPointer, MountMeta)


def decode(key: str, value: bytes) -> BucketMeta | StreamMeta | MountMeta:
    """Decode a meta-topic value; the key's prefix says which schema it has."""
    if key.startswith("bucket:"):
        return decode_as(BucketMeta, key, value)
    if key.startswith("mount:"):
        return decode_as(MountMeta, key, value)
    return decode_as(StreamMeta, key, value)


def decode_as(kind: type[R], key: str, value: bytes) -> R:
    writer, reader = _schemas_of(kind, key, value[:1])
    data = fastavro.schemaless_reader(io.BytesIO(value[1:]), writer, reader)
    if not isinstance(data, dict):
        raise ValueError(f"record {key!r} is not a record")
    names = {field.name for field in fields(kind)}
    values = {name: data[name] for name in names}
    if kind is StreamMeta:
        values["inherited"] = tuple(Segment(**segment) for segment in values["inherited"])
    return kind(**values)


def _schemas_of(kind: type[R], key: str, format_byte: bytes) -> tuple[Any, Any]:
    """(writer schema, reader schema) of a record by its format byte."""
    older = _OLDER.get(kind, {})
    if format_byte in older:
        return older[format_byte], _PARSED[kind]
    if format_byte == _CURRENT.get(kind, FORMAT_V1):
        return _PARSED[kind], None
    raise ValueError(f"record {key!r} has an unknown format byte")
