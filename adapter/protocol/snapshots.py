"""Snapshot and retention rules: where a snapshot may be published, and what stays readable.

A snapshot at offset `o` folds the stream's messages before `o`; publishing it makes `o` the
stream's earliest retained offset (`StreamMeta.retained_from`), so every read below it (and
from `-1`) answers 410 with `Stream-Earliest-Offset`. A trim (`StreamMeta.trimmed_to`) moves
the earliest offset the same way without a snapshot; the further of the two holds. Every
Kafka offset from the start of a stream's history to its tail falls between two records, so
each is a message boundary of the stream (the same boundaries ordinary reads and `/bootstrap`
use); offsets before the history begins are not positions of this stream.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Final

from adapter.protocol.commands import PublishSnapshot
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.model import SnapshotPointer, StreamMeta
from adapter.protocol.offsets import ReadFrom, Start, encode

DEFAULT_MAX_SNAPSHOT_BYTES: Final = 128 * 1024 * 1024
OBJECT_PREFIX: Final = "snapshots/"
EARLIEST_HEADER: Final = "Stream-Earliest-Offset"


def publish_refusal(
    meta: StreamMeta, command: PublishSnapshot, max_bytes: int, now_ms: int
) -> ProtocolError | None:
    """The refusal of a publish at `command.offset`, if any (the stream exists)."""
    offset = command.offset
    if now_ms > command.commit_by_ms:
        return ProtocolError(
            ErrorCode.UNAVAILABLE, "the snapshot took too long to publish; publish it again"
        )
    if command.size > max_bytes:
        return ProtocolError(
            ErrorCode.PAYLOAD_TOO_LARGE, f"a snapshot is at most {max_bytes} bytes"
        )
    if offset > meta.next_offset:
        return ProtocolError(
            ErrorCode.OFFSET_BEYOND_TAIL,
            f"snapshot offset {encode(offset)} is past the tail {encode(meta.next_offset)}",
        )
    if meta.retains and offset < meta.earliest_offset:
        return gone_before(meta)
    if offset < meta.history_start:
        return ProtocolError(
            ErrorCode.INVALID_OFFSET,
            f"offset {encode(offset)} is before the stream begins ({encode(meta.history_start)})",
        )
    return None


def pointer(meta: StreamMeta, command: PublishSnapshot, now_ms: int) -> SnapshotPointer:
    return SnapshotPointer(
        bucket_id=meta.bucket_id,
        stream_id=meta.stream_id,
        offset=command.offset,
        content_type=command.content_type,
        size=command.size,
        object_key=command.object_key,
        sha256=command.sha256,
        stream_created_at_ms=meta.created_at_ms,
        published_at_ms=now_ms,
    )


def check_readable(meta: StreamMeta, start: ReadFrom) -> None:
    """Raise 410 when a read starts below the earliest retained offset (`-1` included)."""
    if not meta.retains or start is Start.NOW:
        return
    position = meta.history_start if start is Start.BEGINNING else start
    if position < meta.earliest_offset:
        raise gone_before(meta)


def gone_before(meta: StreamMeta) -> ProtocolError:
    earliest = encode(meta.earliest_offset)
    why = "replaced by a snapshot" if meta.snapshot_offset is not None else "trimmed"
    return ProtocolError(
        ErrorCode.OFFSET_GONE,
        f"data before {earliest} was {why}: GET the stream's /bootstrap",
        headers={EARLIEST_HEADER: earliest},
    )


def needed_from(meta: StreamMeta, pointer: SnapshotPointer | None, settled_before_ms: int) -> int:
    """The first offset of its partition the stream may still be read at.

    Its snapshot's offset once that was published before `settled_before_ms`, and its trim
    point once it was trimmed before then (so every instance has followed the move for a grace
    period and none serves a read below it; of a stream trimmed often, an earlier point that
    has, `trims.trimmed`), the furthest of them; else the start of its history. A fork's
    history starts in its source's range. Soft-deleted and expired streams count too: a stream
    still in the catalog may be read by an instance whose clock or catalog lags, and they are
    few and collected.
    """
    floor = meta.history_start
    if pointer is not None and pointer.published_at_ms <= settled_before_ms:
        floor = max(floor, pointer.offset)
    trims = (
        (meta.trimmed_to, meta.trimmed_at_ms),
        (meta.trim_settling_to, meta.trim_settling_at_ms),
    )
    for to, at in trims:
        if to is not None and at is not None and at <= settled_before_ms:
            floor = max(floor, to)
    if meta.trim_settled_to is not None:  # settled already when the stream was last trimmed
        floor = max(floor, meta.trim_settled_to)
    return floor


def retention_floors(
    streams: Iterable[tuple[StreamMeta, SnapshotPointer | None]], settled_before_ms: int
) -> dict[int, int]:
    """Per partition, the offset below which no stream of it (with its visible snapshot)
    needs a record: Kafka may delete the records below it. A partition without streams has
    no floor (a stream committed but not yet in the catalog could be in it)."""
    floors: dict[int, int] = {}
    for meta, pointer in streams:
        need = needed_from(meta, pointer, settled_before_ms)
        floors[meta.partition] = min(floors.get(meta.partition, need), need)
    return floors


def object_key(bucket_id: str, stream_id: str, offset: int, unique: str) -> str:
    """A new blob's key: unique per publish, so a retry never overwrites a committed blob.

    Stream ids may hold any character; their hash keeps keys safe for every store."""
    digest = hashlib.sha256(stream_id.encode()).hexdigest()[:32]
    return f"{OBJECT_PREFIX}{bucket_id}/{digest}/{offset:020d}-{unique}"
