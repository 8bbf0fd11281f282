"""Snapshots: blobs in the object store, pointers in the compacted snapshots topic.

A publish stores the blob first, under a key no other publish uses, and only then commits its
pointer with the stream's new retention (`StreamService.publish`, one Kafka transaction). A
publish interrupted before that commit leaves a blob nothing points to, never a visible half
snapshot; such orphans and superseded blobs are left for a collector **(planned)**.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import uuid
from collections.abc import Awaitable
from typing import TypeVar

from adapter.objects.base import ObjectStore, ObjectStoreError
from adapter.protocol import snapshots
from adapter.protocol.commands import PublishSnapshot, StreamRef
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.service.streams import StreamService
from adapter.state.records import SnapshotPointer, StreamMeta

log = logging.getLogger(__name__)
T = TypeVar("T")


class SnapshotService:
    def __init__(self, streams: StreamService, store: ObjectStore) -> None:
        self.streams = streams
        self.store = store

    async def publish(
        self, ref: StreamRef, offset: int, content_type: str, blob: bytes
    ) -> StreamMeta:
        """Store the blob, then make it the stream's latest snapshot."""
        key = snapshots.object_key(ref.bucket_id, ref.stream_id, offset, uuid.uuid4().hex)
        digest = hashlib.sha256(blob).hexdigest()
        command = PublishSnapshot(ref, offset, content_type, len(blob), key, digest)
        await self.streams.publish(command, check_only=True)  # refuse before uploading
        await _translated(self.store.put(key, blob))
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
        meta = self.streams.existing(ref)
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

    async def blob(self, pointer: SnapshotPointer) -> bytes:
        data = await _translated(self.store.get(pointer.object_key))
        if data is None:  # collected after a newer one replaced it while we looked
            raise ProtocolError(ErrorCode.SNAPSHOT_NOT_FOUND, "the snapshot was replaced")
        return data

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
