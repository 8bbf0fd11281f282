"""Catch-up reads: where a read starts, and how far it may go, for one stream.

A stream's history is a list of ranges of its partition (`StreamMeta.segments`): a fork's
inherited ranges of its sources' records, then its own. A read walks them in order, jumping
the gaps between them, so offsets of a fork are the same tokens as its source's below the
fork point. Within a range, offsets the cold tier covers are read from chunks, the rest from
the hot tail or Kafka; one response may cross from cold to hot.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

from adapter.log.errors import BelowLogStart
from adapter.log.hot_cache import HotCache
from adapter.log.reader import UNBOUNDED as UNBOUNDED_BUDGET
from adapter.log.reader import Budget, ReadRequest, ReadResult
from adapter.objects.base import ObjectStoreError
from adapter.protocol.commands import Chunk
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.model import Segment, StreamMeta
from adapter.protocol.offsets import ReadFrom, resolve_start
from adapter.protocol.read_options import UNBOUNDED, Bounds
from adapter.protocol.snapshots import check_readable, gone_before
from adapter.service.interfaces import RangeReader
from adapter.state.catalog import Catalog
from adapter.tier.cold import ChunkCollected, ColdReader
from adapter.tier.manifest import Place, TierRange
from topology.wire import owner_of_key, stream_key

T = TypeVar("T")


class ReadPath:
    """Reads come from chunks below the tiered point, else from the hot tail when it holds the
    whole range, else from Kafka."""

    def __init__(
        self,
        reader: RangeReader,
        cache: HotCache,
        cold: ColdReader,
        catalog: Catalog,
        check_retention: bool = True,  # off only for the fault suite's broken build
    ) -> None:
        self.reader = reader
        self.cache = cache
        self.cold = cold
        self.catalog = catalog
        self.check_retention = check_retention

    async def read(
        self, topic: str, meta: StreamMeta, start: ReadFrom, bounds: Bounds = UNBOUNDED
    ) -> Chunk:
        """Messages from `start` on (410 below the earliest retained offset), at most as many
        as the reader's `bounds` allow."""
        if self.check_retention:
            check_readable(meta, start)
        first = position = resolve_start(meta, start)
        messages: list[bytes] = []
        traces: list[bytes] = []
        size = 0
        limit = self.reader.limits.max_read_bytes
        for segment in meta.segments():
            if segment.end <= position:
                continue
            position = max(position, segment.start)
            taken = 0  # of this range, so pieces bound the range as one Kafka read would
            while position < segment.end:
                budget = budget_left(bounds, size, len(messages))
                result = await self._read(topic, meta, segment, position, taken, budget)
                messages += result.messages
                traces += result.traces
                got = sum(len(message) for message in result.messages)
                size, taken, position = size + got, taken + got, result.next_offset
                # A cold piece that ends at its tiered range's end (complete, short of the
                # segment's) goes on even when full: the next piece takes nothing but finds
                # the next message's offset, which is where one Kafka read would have ended
                # (past the commit markers in between), so the offset tokens match.
                at_range_end = result.complete and position < segment.end
                if not result.complete or (size >= limit and not at_range_end):
                    return Chunk(
                        meta, messages, first, position, position >= meta.next_offset, traces
                    )
        return Chunk(meta, messages, first, position, position >= meta.next_offset, traces)

    async def _read(
        self,
        topic: str,
        meta: StreamMeta,
        segment: Segment,
        start: int,
        already: int,
        budget: Budget = UNBOUNDED_BUDGET,
    ) -> ReadResult:
        """Part of one range of the history: from chunks if `start` is tiered (to the tiered
        range's end), else from the hot tail if it holds it all, else from Kafka."""
        limit = self.reader.limits.max_read_bytes
        tiered = self._tiered(topic, meta, start)
        if tiered is not None:
            return await self._read_cold(tiered, meta, segment, start, already, budget)
        key = owner_of_key(meta.data_bucket, segment.stream_id)  # the hot tail's key
        result = None if already else self.cache.read(key, start, segment.end, limit, budget)
        if result is None:
            record_key = stream_key(segment.stream_id)
            request = ReadRequest(
                topic, meta.partition, record_key, start, segment.end, already, budget
            )
            try:
                result = await self.reader.read(request)
            except BelowLogStart:
                # Tiered and freed while this read went to Kafka: the range is in the index
                # now (it enters before Kafka frees it), unless another instance tiered it
                # and this one has not followed its record yet (503: the client retries).
                tiered = self._tiered(topic, meta, start)
                if tiered is None:
                    raise
                return await self._read_cold(tiered, meta, segment, start, already, budget)
        return result

    async def _read_cold(
        self,
        tiered: TierRange,
        meta: StreamMeta,
        segment: Segment,
        start: int,
        already: int,
        budget: Budget = UNBOUNDED_BUDGET,
    ) -> ReadResult:
        stop = min(segment.end, tiered.end)
        limit = self.reader.limits.max_read_bytes
        cold = self.cold.read(tiered, segment.stream_id, start, stop, limit, already, budget)
        # `complete` means the tiered range's end here: the caller goes on from there.
        try:
            return await cold_answer(cold)
        except ChunkCollected as error:
            # A read that began before a newer snapshot (or a deletion) and outlived the
            # grace period: what it still needs is gone, which it must be told.
            raise self._gone(meta) from error

    def _gone(self, meta: StreamMeta) -> ProtocolError:
        """410 with the stream's earliest offset as it is now (404 if it is gone)."""
        now = self.catalog.stream(meta.bucket_id, meta.stream_id)
        if now is None or now.created_at_ms != meta.created_at_ms:
            return ProtocolError(ErrorCode.STREAM_NOT_FOUND, f"stream {meta.stream_id!r} is gone")
        return gone_before(now)

    def _tiered(self, topic: str, meta: StreamMeta, start: int) -> TierRange | None:
        place = self.place(topic, meta)
        return None if place is None else self.catalog.tier.covering(place, start)

    def place(self, topic: str, meta: StreamMeta) -> Place | None:
        """The stream's partition as the cold tier names it (None once its bucket is gone)."""
        bucket = self.catalog.bucket(meta.data_bucket)
        return None if bucket is None else Place(topic, bucket.created_at_ms, meta.partition)


def budget_left(bounds: Bounds, size: int, count: int) -> Budget:
    """What the reader's bounds leave for the next piece of an answer holding so much."""
    if not bounds.bounded:
        return UNBOUNDED_BUDGET
    left_bytes = None if bounds.max_bytes is None else max(0, bounds.max_bytes - size)
    left = None if bounds.max_messages is None else max(0, bounds.max_messages - count)
    return Budget(left_bytes, left, empty=count == 0)


async def cold_answer(read: Awaitable[T]) -> T:
    """A cold read, or the error the client gets: a store that is down is 503 (retry), never
    a partial answer."""
    try:
        return await read
    except ObjectStoreError as error:
        code = ErrorCode.UNAVAILABLE if error.retriable else ErrorCode.INTERNAL
        raise ProtocolError(code, f"cold tier: {error}") from error
