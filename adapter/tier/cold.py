"""Reads from cold chunks: ranged GETs of the blocks a read needs, through a bounded cache.

A read gets the same messages, with the same offsets, as a Kafka read of the same range
would: a chunk holds exactly the stream's committed data records of its range. It fetches the
chunk's header (its block index, `chunks.py`) and then only the blocks from the one holding
its start offset on, as many as its byte bound may need in one ranged GET (blocks hold about
`BLOCK_BYTES` of payload each; `READ_AHEAD_BLOCKS` when the block before is cached: a reader
going on through the chunk), and more only if they did not do; a chunk no larger than
`HEAD_BYTES` (or one without an index) is fetched whole. A store that fails raises
`ObjectStoreError` (retriable ones become 503 at the edge, a chunk missing from the store 500);
a chunk the collector dropped raises `ChunkCollected` (410); nothing partial is returned.
"""

from __future__ import annotations

import asyncio
import bisect
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable
from typing import Generic, TypeVar

from adapter.log.reader import UNBOUNDED, Budget, ReadResult
from adapter.objects.base import ObjectStore, ObjectStoreError
from adapter.tier.chunks import BLOCK_BYTES, ColdMessage, Incomplete, Layout, decode, layout
from adapter.tier.manifest import TierChunk, TierRange

# The first GET of a chunk: its header and index (a few KiB even for a 64 MiB chunk).
HEAD_BYTES = 64 * 1024
# Blocks one GET takes when the block before is cached (a reader going on through the chunk,
# as catch-up does): 4 MiB of payload, so a sequential read is not one round trip per read.
READ_AHEAD_BLOCKS = 16
V = TypeVar("V")
# Whether a lookup by time wants a message (written at or after a moment, or past an offset).
Wanted = Callable[[ColdMessage], bool]


class ChunkCollected(Exception):
    """The stream's chunk of the range was collected: its messages are gone (a 410)."""


class ColdReader:
    def __init__(self, store: ObjectStore, cache_bytes: int) -> None:
        self.store = store
        self.cache: ChunkCache[list[ColdMessage]] = ChunkCache(cache_bytes)  # decoded blocks
        self.layouts: ChunkCache[Layout] = ChunkCache(max(cache_bytes // 16, HEAD_BYTES))

    async def read(
        self,
        tier_range: TierRange,
        stream_id: str,
        start: int,
        stop: int,
        max_bytes: int,
        already: int = 0,
        budget: Budget = UNBOUNDED,
    ) -> ReadResult:
        """The stream's messages at offsets [start, stop) (stop at most the range's end):
        with the `already` bytes read before them, at most `max_bytes`, but always one
        message — the bound a Kafka read of the same range keeps (`log/reader.py`)."""
        chunk = tier_range.chunk_of(stream_id)
        if chunk is None or chunk.last_offset < start or chunk.first_offset >= stop:
            return ReadResult([], stop, True)
        if chunk.collected:
            raise ChunkCollected(f"{stream_id!r} at {start} of {tier_range.key}")
        shape = await self._layout(chunk)
        taken: list[bytes] = []
        size = 0
        first = shape.block_at(start)
        span = 1 + max(0, max_bytes - already) // BLOCK_BYTES  # blocks the bound may take
        for number in range(first, len(shape.blocks)):
            block = shape.blocks[number]
            if block.first_offset >= stop:
                break
            full = (taken or already) and already + size > max_bytes
            if number > first and (full or budget.full(size, len(taken), 1)):
                # Full: the next message is this block's first (the index says which),
                # so the block need not be fetched.
                return ReadResult(taken, block.first_offset, False)
            ahead = max(1, span - (number - first))
            messages = await self._block(chunk.object_key, shape, number, ahead, stop)
            offsets = [message.offset for message in messages]
            for message in messages[bisect.bisect_left(offsets, start) :]:
                if message.offset >= stop:
                    return ReadResult(taken, stop, True)
                full = (taken or already) and already + size + len(message.payload) > max_bytes
                if full or budget.full(size, len(taken), len(message.payload)):
                    return ReadResult(taken, message.offset, False)
                taken.append(message.payload)
                size += len(message.payload)
        return ReadResult(taken, stop, True)

    async def offsets(
        self, tier_range: TierRange, stream_id: str, start: int, stop: int, keep: int
    ) -> deque[int]:
        """The offsets of the stream's last `keep` messages in the range at [start, stop):
        memory for `keep` offsets, whatever the chunk holds. A collected chunk raises
        `ChunkCollected`."""
        found: deque[int] = deque(maxlen=keep)
        async for messages in self._blocks(tier_range, stream_id, start, stop):
            found += (m.offset for m in messages)
        return found

    async def first(
        self, tier_range: TierRange, stream_id: str, start: int, stop: int, limit: int
    ) -> list[ColdMessage]:
        """The stream's first `limit` messages in the range at [start, stop): the blocks
        that hold them only. A collected chunk raises `ChunkCollected`."""
        found: list[ColdMessage] = []
        async for messages in self._blocks(tier_range, stream_id, start, stop):
            found += messages[: limit - len(found)]
            if len(found) >= limit:
                break
        return found

    async def _blocks(
        self, tier_range: TierRange, stream_id: str, start: int, stop: int
    ) -> AsyncIterator[list[ColdMessage]]:
        """The stream's messages at [start, stop) of the range, one block at a time."""
        chunk = tier_range.chunk_of(stream_id)
        if chunk is None or chunk.last_offset < start or chunk.first_offset >= stop:
            return
        if chunk.collected:
            raise ChunkCollected(f"{stream_id!r} at {start} of {tier_range.key}")
        shape = await self._layout(chunk)
        for number in range(shape.block_at(start), len(shape.blocks)):
            if shape.blocks[number].first_offset >= stop:
                break
            messages = await self._block(chunk.object_key, shape, number, 1, stop)
            yield [m for m in messages if start <= m.offset < stop]

    async def last_in(
        self, tier_range: TierRange, stream_id: str, start: int, stop: int
    ) -> ColdMessage | None:
        """The stream's last message of the range at offsets [start, stop), None if none is
        there: a probe of the chunk's time that costs its header and one block."""
        chunk = tier_range.chunk_of(stream_id)
        if chunk is None or chunk.collected or chunk.last_offset < start:
            return None
        shape = await self._layout(chunk)
        number = shape.block_at(min(chunk.last_offset, stop - 1))
        messages = await self._block(chunk.object_key, shape, number, 1, stop)
        inside = [message for message in messages if start <= message.offset < stop]
        return inside[-1] if inside else None

    async def first_at(
        self, tier_range: TierRange, stream_id: str, start: int, stop: int, wanted: Wanted
    ) -> int | None:
        """The offset of the stream's first `wanted` message of the range in [start, stop);
        None if none is. Messages are taken as wanted from some offset on (times grow with
        offsets), so the blocks are bisected: a few GETs of one block each, whatever the
        chunk's size."""
        chunk = tier_range.chunk_of(stream_id)
        if chunk is None or chunk.collected or chunk.last_offset < start:
            return None
        shape = await self._layout(chunk)
        low, high = shape.block_at(start), shape.block_at(min(chunk.last_offset, stop - 1))
        while low < high:  # the answer lies in block `high` or before it, not before `low`
            middle = (low + high) // 2
            messages = await self._block(chunk.object_key, shape, middle, 1, stop)
            inside = [m for m in messages if start <= m.offset < stop]
            if inside and wanted(inside[-1]):
                high = middle
            else:
                low = middle + 1
        messages = await self._block(chunk.object_key, shape, low, 1, stop)
        return next((m.offset for m in messages if start <= m.offset < stop and wanted(m)), None)

    async def _layout(self, chunk: TierChunk) -> Layout:
        key = chunk.object_key
        cached = self.layouts.get(key)
        if cached is not None:
            return cached
        whole = chunk.object_bytes <= HEAD_BYTES
        length = chunk.object_bytes if whole else HEAD_BYTES
        while True:
            head = await self._get(key, 0, length)
            if whole:  # the first GET was the whole chunk: keep its messages too
                shape = Layout.whole(chunk.first_offset, len(head))
                self._keep(key, 0, await asyncio.to_thread(decode, head))
                break
            try:
                found = layout(head)
            except Incomplete as error:
                if len(head) < length:  # the object ended inside its header
                    raise ObjectStoreError(f"cold chunk {key} is cut short", False) from error
                length *= 2  # a header past HEAD_BYTES: a stream of very many blocks
                continue
            shape = found or Layout.whole(chunk.first_offset, chunk.object_bytes)
            break
        self.layouts.put(key, shape, shape.size)
        return shape

    async def _block(
        self, key: str, shape: Layout, number: int, ahead: int, stop: int
    ) -> list[ColdMessage]:
        """Block `number`'s messages; if it is not cached, one GET fetches it and the next
        uncached blocks below `stop`, up to `ahead` blocks in all, and caches them."""
        cached = self.cache.get(f"{key}#{number}")
        if cached is not None:
            return cached
        if number and self.cache.get(f"{key}#{number - 1}") is not None:
            ahead = max(ahead, READ_AHEAD_BLOCKS)
        blocks = shape.blocks
        last = number
        while (
            last + 1 < min(len(blocks), number + ahead)
            and blocks[last + 1].first_offset < stop
            and self.cache.get(f"{key}#{last + 1}") is None
        ):
            last += 1
        data = await self._get(key, blocks[number].start, blocks[last].end)
        decoded = await asyncio.to_thread(_decode_blocks, shape, number, last, data)
        for each, messages in enumerate(decoded, number):
            self._keep(key, each, messages)
        return decoded[0]

    def _keep(self, key: str, number: int, messages: list[ColdMessage]) -> None:
        self.cache.put(f"{key}#{number}", messages, sum(len(m.payload) for m in messages))

    async def _get(self, key: str, start: int, end: int) -> bytes:
        data = await self.store.get(key, start, end)
        if data is None:
            raise ObjectStoreError(f"cold chunk {key} is missing", retriable=False)
        return data


def _decode_blocks(shape: Layout, first: int, last: int, data: bytes) -> list[list[ColdMessage]]:
    """Each block of `data` (blocks first..last, fetched in one piece), in a worker thread."""
    base = shape.blocks[first].start
    return [
        decode(shape.header + data[block.start - base : block.end - base])
        for block in shape.blocks[first : last + 1]
    ]


class ChunkCache(Generic[V]):
    """Least recently used first out, at most `capacity` bytes (as each entry is sized)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.size = 0
        self._entries: OrderedDict[str, tuple[V, int]] = OrderedDict()

    def get(self, key: str) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[0]

    def put(self, key: str, value: V, size: int) -> None:
        if size > self.capacity or key in self._entries:
            return
        self._entries[key] = (value, size)
        self.size += size
        while self.size > self.capacity:
            _, (_, dropped) = self._entries.popitem(last=False)
            self.size -= dropped
