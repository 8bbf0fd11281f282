"""Reads from cold chunks, through a cache bounded in bytes.

A read gets the same messages, with the same offsets, as a Kafka read of the same range
would: a chunk holds exactly the stream's committed data records of its range. A store that
fails raises `ObjectStoreError` (retriable ones become 503 at the edge); nothing partial is
returned.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict

from adapter.log.reader import ReadResult
from adapter.objects.base import ObjectStore, ObjectStoreError
from adapter.tier.chunks import ColdMessage, decode
from adapter.tier.manifest import TierRange


class ColdReader:
    def __init__(self, store: ObjectStore, cache_bytes: int) -> None:
        self.store = store
        self.cache = ChunkCache(cache_bytes)

    async def read(
        self,
        tier_range: TierRange,
        stream_id: str,
        start: int,
        stop: int,
        max_bytes: int,
        already: int = 0,
    ) -> ReadResult:
        """The stream's messages at offsets [start, stop) (stop at most the range's end):
        with the `already` bytes read before them, at most `max_bytes`, but always one
        message — the bound a Kafka read of the same range keeps (`log/reader.py`)."""
        chunk = tier_range.chunk_of(stream_id)
        if chunk is None or chunk.last_offset < start or chunk.first_offset >= stop:
            return ReadResult([], stop, True)
        messages = await self._messages(chunk.object_key)
        offsets = [message.offset for message in messages]
        taken: list[bytes] = []
        size = 0
        for message in messages[bisect.bisect_left(offsets, start) :]:
            if message.offset >= stop:
                break
            if (taken or already) and already + size + len(message.payload) > max_bytes:
                return ReadResult(taken, message.offset, False)
            taken.append(message.payload)
            size += len(message.payload)
        return ReadResult(taken, stop, True)

    async def _messages(self, key: str) -> list[ColdMessage]:
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        data = await self.store.get(key)
        if data is None:
            raise ObjectStoreError(f"cold chunk {key} is missing", retriable=False)
        messages = decode(data)
        self.cache.put(key, messages, sum(len(m.payload) for m in messages))
        return messages


class ChunkCache:
    """Decoded chunks, least recently used first out, at most `capacity` payload bytes."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.size = 0
        self._entries: OrderedDict[str, tuple[list[ColdMessage], int]] = OrderedDict()

    def get(self, key: str) -> list[ColdMessage] | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[0]

    def put(self, key: str, messages: list[ColdMessage], size: int) -> None:
        if size > self.capacity or key in self._entries:
            return
        self._entries[key] = (messages, size)
        self.size += size
        while self.size > self.capacity:
            _, (_, dropped) = self._entries.popitem(last=False)
            self.size -= dropped
