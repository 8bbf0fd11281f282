"""The latest chunks read for live readers, shared by every reader woken at the same position.

A commit wakes many long-polls (and SSE feeds) at once, most at the same position: the first
reads the chunk (the hot tail, or Kafka), the others get the same `Chunk` while the stream's
tail and closure are unchanged. Bounded to the most recent `MAX_CHUNKS` positions and to
`MAX_BYTES` of message bytes in all, so its memory does not grow with the chunk size setting.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict

from adapter.protocol.commands import Chunk, Read, StreamRef
from adapter.protocol.model import StreamMeta
from adapter.protocol.read_options import UNBOUNDED, Bounds
from adapter.service.stream_source import StreamSource
from adapter.service.streams import StreamService

MAX_CHUNKS = 256
MAX_BYTES = 16 * 1024 * 1024

Key = tuple[str, str, int]  # bucket id, stream id, position


class RecentChunks:
    """The most recently used chunks, by position; the oldest go first past either bound."""

    def __init__(self, max_chunks: int = MAX_CHUNKS, max_bytes: int = MAX_BYTES) -> None:
        self.max_chunks = max_chunks
        self.max_bytes = max_bytes
        self.bytes = 0
        self._chunks: OrderedDict[Key, tuple[Chunk, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._chunks)

    def get(self, key: Key, meta: StreamMeta) -> Chunk | None:
        """The chunk kept for `key`, if the stream has not moved on since it was read."""
        kept = self._chunks.get(key)
        if kept is None:
            return None
        chunk = kept[0]
        if (chunk.meta.next_offset, chunk.meta.closed) != (meta.next_offset, meta.closed):
            return None
        self._chunks.move_to_end(key)
        return chunk if chunk.meta is meta else dataclasses.replace(chunk, meta=meta)

    def put(self, key: Key, chunk: Chunk) -> None:
        self._drop(key)
        size = sum(len(message) for message in chunk.messages)
        self._chunks[key] = (chunk, size)
        self.bytes += size
        while self._chunks and (len(self._chunks) > self.max_chunks or self.bytes > self.max_bytes):
            self._drop(next(iter(self._chunks)))

    def _drop(self, key: Key) -> None:
        kept = self._chunks.pop(key, None)
        if kept is not None:
            self.bytes -= kept[1]


class SharedReads:
    def __init__(self, service: StreamService) -> None:
        self.service = service
        self._recent = RecentChunks()

    async def read(
        self, source: StreamSource, ref: StreamRef, position: int, bounds: Bounds = UNBOUNDED
    ) -> Chunk:
        """A catch-up read from `position`, as the stream's source answers it. A read with
        its own bounds is its own: its chunk is neither shared nor kept."""
        if bounds.bounded:
            return await source.read(Read(ref, position, bounds))
        meta = source.accessed(ref)
        key = (ref.bucket_id, ref.stream_id, position)
        chunk = self._recent.get(key, meta)
        if chunk is None:
            chunk = await source.read(Read(ref, position))
            self._recent.put(key, chunk)
        return chunk
