"""The state records of the compacted topics as the protocol's model (`adapter/protocol/model.py`:
bucket and stream metadata, producer states, slot owners, snapshot pointers), to and from the
bytes of their values. The keys and the bytes are spelled in `topology/internal_records.py`."""

from __future__ import annotations

from dataclasses import fields
from typing import TypeVar

from adapter.protocol.model import (
    BucketMeta,
    MountMeta,
    ProducerRecord,
    Segment,
    SlotOwner,
    SnapshotPointer,
    StreamMeta,
)
from topology.internal_records import RecordKind, decode_value, encode_value, meta_kind

__all__ = [
    "BucketMeta",
    "MountMeta",
    "ProducerRecord",
    "Segment",
    "SlotOwner",
    "SnapshotPointer",
    "StateRecord",
    "StreamMeta",
    "decode",
    "decode_as",
    "encode",
]

StateRecord = BucketMeta | StreamMeta | ProducerRecord | SlotOwner | SnapshotPointer | MountMeta

_KINDS: dict[type[StateRecord], RecordKind] = {
    BucketMeta: RecordKind.BUCKET_META,
    MountMeta: RecordKind.MOUNT_META,
    StreamMeta: RecordKind.STREAM_META,
    ProducerRecord: RecordKind.PRODUCER_STATE,
    SlotOwner: RecordKind.SLOT_OWNER,
    SnapshotPointer: RecordKind.SNAPSHOT_POINTER,
}


def encode(record: StateRecord) -> bytes:
    data = vars(record)  # scalars, without asdict's deep copy
    if isinstance(record, StreamMeta):
        data = data | {"inherited": [segment._asdict() for segment in record.inherited]}
    return encode_value(_KINDS[type(record)], data)


R = TypeVar("R", BucketMeta, StreamMeta, ProducerRecord, SlotOwner, SnapshotPointer, MountMeta)


def decode(key: str, value: bytes) -> BucketMeta | StreamMeta | MountMeta:
    """Decode a meta-topic value; the key's prefix says which schema it has."""
    kind = meta_kind(key)
    if kind is RecordKind.BUCKET_META:
        return decode_as(BucketMeta, key, value)
    if kind is RecordKind.MOUNT_META:
        return decode_as(MountMeta, key, value)
    return decode_as(StreamMeta, key, value)


# Each record type's field names: `fields()` builds them anew at each call (~30 Python calls for
# a stream's), and a catalog replaying or following its topics decodes every record.
_NAMES = {kind: tuple(field.name for field in fields(kind)) for kind in _KINDS}


def decode_as(kind: type[R], key: str, value: bytes) -> R:
    data = decode_value(_KINDS[kind], value, key)
    values = {name: data[name] for name in _NAMES[kind]}
    if kind is StreamMeta:
        values["inherited"] = tuple(Segment(**segment) for segment in values["inherited"])
    return kind(**values)
