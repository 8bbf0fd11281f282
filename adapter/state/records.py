"""The state records of the compacted topics as the protocol's model (`adapter/protocol/model.py`:
bucket and stream metadata, producer states, slot owners, snapshot pointers), to and from the
bytes of their values. The keys and the bytes are spelled in `topology/internal_records.py`."""

from __future__ import annotations

from dataclasses import fields
from typing import TypeVar

from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.model import (
    BucketMeta,
    MountMeta,
    ProducerRecord,
    Segment,
    SlotOwner,
    SnapshotPointer,
    StreamMeta,
)
from adapter.state.format_gate import GATE
from topology.internal_records import (
    ALL_FIELDS_LEVEL,
    RecordKind,
    decode_value,
    encode_value,
    lost_fields,
    meta_kind,
)

__all__ = ["StateRecord", "decode", "decode_as", "encode"]

StateRecord = BucketMeta | StreamMeta | ProducerRecord | SlotOwner | SnapshotPointer | MountMeta

_KINDS: dict[type[StateRecord], RecordKind] = {
    BucketMeta: RecordKind.BUCKET_META,
    MountMeta: RecordKind.MOUNT_META,
    StreamMeta: RecordKind.STREAM_META,
    ProducerRecord: RecordKind.PRODUCER_STATE,
    SlotOwner: RecordKind.SLOT_OWNER,
    SnapshotPointer: RecordKind.SNAPSHOT_POINTER,
}


def encode(record: StateRecord, level: int | None = None) -> bytes:
    """The value of `record` in the format level in force (`format_gate.py`), or `level`'s.

    ProtocolError 409 `format_not_finalized` for a record that level cannot hold (a fork
    across buckets, a bucket's age retention, before `ALL_FIELDS_LEVEL` is in force)."""
    data = vars(record)  # scalars, without asdict's deep copy
    if isinstance(record, StreamMeta):
        data = data | {"inherited": [segment._asdict() for segment in record.inherited]}
    kind = _KINDS[type(record)]
    level = GATE.level if level is None else level
    lost = lost_fields(kind, data, level)
    if lost:
        raise not_finalized(", ".join(lost))
    return encode_value(kind, data, level)


def refuse_before_newest(what: str) -> None:
    """ProtocolError 409 `format_not_finalized` for `what` (a request whose records only the
    formats of `ALL_FIELDS_LEVEL` hold) while an older level is in force: checked before the
    request reaches a slot writer, whose transaction would otherwise meet it in `encode`."""
    if GATE.level < ALL_FIELDS_LEVEL:
        raise not_finalized(what)


def not_finalized(what: str) -> ProtocolError:
    return ProtocolError(
        ErrorCode.FORMAT_NOT_FINALIZED,
        f"{what} needs record format level {ALL_FIELDS_LEVEL}, which is not in force yet: upgrade "
        "every instance, then run `durable-kafka upgrade finalize`",
    )


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
