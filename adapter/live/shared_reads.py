"""The latest chunks read for live readers, shared by every reader woken at the same position.

A commit wakes many long-polls (and SSE feeds) at once, most at the same position: the first
reads the chunk (the hot tail, or Kafka), the others get the same `Chunk` while the stream's
tail and closure are unchanged. Bounded to the most recent `MAX_CHUNKS` positions.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict

from adapter.protocol.commands import Chunk, Read, StreamRef
from adapter.service.streams import StreamService

MAX_CHUNKS = 256


class SharedReads:
    def __init__(self, service: StreamService) -> None:
        self.service = service
        self._chunks: OrderedDict[tuple[str, str, int], Chunk] = OrderedDict()

    async def read(self, ref: StreamRef, position: int) -> Chunk:
        """A catch-up read from `position`, as `StreamService.read` answers it."""
        meta = self.service.touch(self.service.live(ref))
        key = (ref.bucket_id, ref.stream_id, position)
        chunk = self._chunks.get(key)
        if chunk is not None and (chunk.meta.next_offset, chunk.meta.closed) == (
            meta.next_offset,
            meta.closed,
        ):
            self._chunks.move_to_end(key)
            return chunk if chunk.meta is meta else dataclasses.replace(chunk, meta=meta)
        chunk = await self.service.read(Read(ref, position))
        self._chunks[key] = chunk
        if len(self._chunks) > MAX_CHUNKS:
            self._chunks.popitem(last=False)
        return chunk
