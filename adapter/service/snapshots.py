"""Snapshots: blobs in the object store, pointers in the compacted snapshots topic.

A publish streams the blob to the store first (never held whole), under a key no other
publish uses, and only then commits its pointer with the stream's new retention
(`StreamService.publish`, one Kafka transaction). A publish interrupted before that commit
leaves a blob nothing points to (or, interrupted mid-upload, no blob), never a visible half
snapshot; such orphans and superseded blobs are the collector's (`service/snapshot_gc.py`).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Awaitable
from dataclasses import dataclass, replace
from typing import Final, TypeVar

from adapter.objects.base import ObjectStore, ObjectStoreError
from adapter.protocol import snapshots
from adapter.protocol.commands import PublishSnapshot, StreamRef
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.model import SnapshotPointer, StreamMeta
from adapter.protocol.offsets import BEGINNING, ReadFrom
from adapter.service.snapshot_gc import windowed
from adapter.service.streams import StreamService

log = logging.getLogger(__name__)
T = TypeVar("T")
# A blob is sent to a bootstrap client in ranges of this size, never held whole.
BLOB_RANGE_BYTES: Final = 1024 * 1024


@dataclass(frozen=True)
class Bootstrap:
    """What a `/bootstrap` answers: the stream as of the request, its snapshot, and the first
    range of the blob (fetched before answering, so a blob gone meanwhile is a 404, not a
    broken response)."""

    meta: StreamMeta
    snapshot: SnapshotPointer | None
    first_range: bytes

    @property
    def updates_from(self) -> ReadFrom:
        """After the snapshot; without one, where a trim left the stream (no snapshot is
        expected there: a trim past one hides it), else its beginning."""
        if self.snapshot is not None:
            return self.snapshot.offset
        trimmed = self.meta.trimmed_to is not None and self.meta.snapshot_offset is None
        return self.meta.earliest_offset if trimmed else BEGINNING


class _Counted:
    """A body passed through: its size and SHA-256 as it goes."""

    def __init__(self, body: AsyncIterable[bytes]) -> None:
        self.body = body
        self.size = 0
        self.digest = hashlib.sha256()

    async def chunks(self) -> AsyncIterator[bytes]:
        async for chunk in self.body:
            self.size += len(chunk)
            self.digest.update(chunk)
            yield chunk


class SnapshotService:
    def __init__(self, streams: StreamService, store: ObjectStore, grace_ms: int) -> None:
        self.streams = streams
        self.store = store
        self.grace_ms = grace_ms

    async def publish(
        self, ref: StreamRef, offset: int, content_type: str, body: AsyncIterable[bytes]
    ) -> StreamMeta:
        """Stream the blob to the store (its size and checksum counted on the way), then make
        it the stream's latest snapshot. `body` raises to refuse it (413): nothing is kept."""
        # The collector deletes a blob nothing points to once it has seen it so for a grace
        # period: a publish commits its pointer within half of it from the upload's start
        # (the body's arrival included), or not at all. The key names that window, so that
        # every instance's collector waits for it, whatever grace period it was given.
        within_ms = self.grace_ms // 2
        unique = windowed(uuid.uuid4().hex, within_ms)
        key = snapshots.object_key(ref.bucket_id, ref.stream_id, offset, unique)
        commit_by = self.streams.clock() + within_ms
        command = PublishSnapshot(ref, offset, content_type, 0, key, "", commit_by)
        await self.streams.publish(command, check_only=True)  # refuse before uploading
        counted = _Counted(body)
        await _translated(self.store.put_stream(key, counted.chunks()))
        command = replace(command, size=counted.size, sha256=counted.digest.hexdigest())
        try:
            return await self.streams.publish(command)
        except ProtocolError:
            await self._discard(key)  # refused after all: nothing points to it
            raise

    async def _discard(self, key: str) -> None:
        try:
            await self.store.delete(key)
        except ObjectStoreError as error:
            log.warning("snapshot blob %s left for the collector: %s", key, error)

    def latest(self, ref: StreamRef) -> tuple[StreamMeta, SnapshotPointer]:
        """The stream and its visible snapshot (404 when it has none)."""
        meta = self.streams.source_for(ref.bucket_id).existing(ref)
        pointer = self.streams.snapshot(meta)
        if pointer is None:
            raise ProtocolError(
                ErrorCode.SNAPSHOT_NOT_FOUND, f"stream {ref.stream_id!r} has no snapshot"
            )
        return meta, pointer

    def at(self, ref: StreamRef, offset: int) -> tuple[StreamMeta, SnapshotPointer]:
        """The visible snapshot at `offset` (404 for any other: superseded or never made)."""
        meta, pointer = self.latest(ref)
        if pointer.offset != offset:
            raise ProtocolError(
                ErrorCode.SNAPSHOT_NOT_FOUND,
                "no snapshot at that offset (superseded or never made)",
            )
        return meta, pointer

    async def bootstrap(self, ref: StreamRef) -> Bootstrap:
        """Start a bootstrap: the stream (its tail bounds what follows) and its snapshot."""
        source = self.streams.source_for(ref.bucket_id)
        await source.at_tail(ref)  # its headers say up to date before any part is read
        meta = source.accessed(ref)
        pointer = self.streams.snapshot(meta)
        if pointer is None:
            return Bootstrap(meta, None, b"")
        return Bootstrap(meta, pointer, await self.first_range(pointer))

    async def first_range(self, pointer: SnapshotPointer) -> bytes:
        """The blob's first range: 404 when the blob is gone (replaced and collected)."""
        return await self._range(pointer, 0)

    async def rest_of(self, pointer: SnapshotPointer | None) -> AsyncIterator[bytes]:
        """The blob's bytes after its first range, range by range (memory: one range)."""
        if pointer is None:
            return
        for start in range(BLOB_RANGE_BYTES, pointer.size, BLOB_RANGE_BYTES):
            yield await self._range(pointer, start)

    async def _range(self, pointer: SnapshotPointer, start: int) -> bytes:
        end = min(start + BLOB_RANGE_BYTES, pointer.size)
        data = await _translated(self.store.get(pointer.object_key, start, end))
        if data is None:  # collected after a newer one replaced it while we looked
            raise ProtocolError(ErrorCode.SNAPSHOT_NOT_FOUND, "the snapshot was replaced")
        return data

    async def updates(self, boot: Bootstrap) -> AsyncIterator[list[bytes]]:
        """The retained messages after the snapshot up to the tail as of the request, one
        bounded read at a time (the same reads, and message boundaries, as catch-up)."""
        meta = boot.meta
        topic = self.streams.buckets.topic(meta.data_bucket)
        position = boot.updates_from
        while True:
            chunk = await self.streams.reads.read(topic, meta, position)
            yield chunk.messages
            if chunk.up_to_date or chunk.next_offset == position:
                return
            position = chunk.next_offset

    def delete_refusal(self, ref: StreamRef, offset: int) -> ProtocolError:
        """Why a delete is refused: only one snapshot is visible and `/bootstrap` needs it
        (409); any other offset names nothing (404, raised)."""
        self.at(ref, offset)
        return ProtocolError(
            ErrorCode.SNAPSHOT_IN_USE,
            "the latest snapshot cannot be deleted: /bootstrap needs it (publish a newer one)",
        )


async def _translated(call: Awaitable[T]) -> T:
    """An object store failure as the error the client gets: retriable ones 503."""
    try:
        return await call
    except asyncio.CancelledError:
        raise
    except ObjectStoreError as error:
        code = ErrorCode.UNAVAILABLE if error.retriable else ErrorCode.INTERNAL
        raise ProtocolError(code, f"object store: {error}") from error
