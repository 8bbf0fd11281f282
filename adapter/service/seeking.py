"""Where a console starts reading and what its rows are in Kafka: the last N messages, the
first message at or after a moment, and the Kafka coordinates of a stream's messages.

A stream's history is ranges of its partition (`StreamMeta.segments`), each keyed by the
stream that wrote it; any offset between two of its records is a valid read position, so a
seek answers the offset of a record, or the history's start or tail when it runs off an end.
Counting back from the tail stops at the offset Kafka still holds from; below it the
messages are in the cold tier's chunks, counted there (a scan of Kafka below its log start
fails: the seek answered 503 on every stream tiered and freed).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from adapter.log.reader import LogReader, ReadRequest, RecordPosition
from adapter.protocol.model import Segment, StreamMeta
from adapter.service.reads import ReadPath, cold_answer
from topology.wire import stream_key

FIRST_WINDOW = 1024  # offsets scanned back from the tail first; each miss scans 4x further


@dataclass(frozen=True)
class Located:
    """A message's Kafka record: where it is, when it was written, how big it is."""

    stream_id: str  # the stream that wrote it: a fork's inherited records are its source's
    position: RecordPosition


class Seeker:
    def __init__(self, reader: LogReader, path: ReadPath) -> None:
        self.reader = reader
        self.path = path  # the cold tier: its index and chunks

    async def last(self, topic: str, meta: StreamMeta, count: int) -> int:
        """The offset `count` messages before the tail (the history's start if it holds fewer).

        It looks back in windows of the partition growing 4x, keeping only the last `wanted`
        records of each: its memory grows with `count` (bounded by `console_max_last`), never
        with the stream."""
        wanted = count
        # Below Kafka's log start the chunks hold the messages; below the earliest offset
        # nothing is to be counted (a trim's or a snapshot's chunks may be collected).
        held_from = await self.reader.log_start(topic, meta.partition)
        floor = meta.earliest_offset
        for segment in reversed(meta.segments()):
            hot_from = max(segment.start, held_from, floor)
            stop, window = segment.end, max(FIRST_WINDOW, 2 * count)
            while stop > hot_from and wanted > 0:
                start = max(hot_from, stop - window)
                found = await self._last(topic, meta.partition, segment, start, stop, wanted)
                if len(found) >= wanted:
                    return found[0].offset
                wanted -= len(found)
                stop, window = start, window * 4
            if wanted > 0 and max(segment.start, floor) < held_from:
                cold = await cold_answer(
                    self._cold_last(topic, meta, segment, floor, held_from, wanted)
                )
                if len(cold) >= wanted:
                    return cold[0]
                wanted -= len(cold)
        return meta.history_start

    async def _cold_last(
        self, topic: str, meta: StreamMeta, segment: Segment, floor: int, below: int, keep: int
    ) -> deque[int]:
        """The offsets of the segment's last `keep` tiered messages in [floor, below)."""
        place = self.path.place(topic, meta)
        ranges = [] if place is None else self.path.catalog.tier.ranges(place)
        found: deque[int] = deque()
        for tier_range in reversed(ranges):
            start = max(segment.start, tier_range.start, floor)
            stop = min(segment.end, tier_range.end, below)
            if start < stop and len(found) < keep:
                wanted = keep - len(found)
                offsets = await self.path.cold.offsets(
                    tier_range, segment.stream_id, start, stop, wanted
                )
                found.extendleft(reversed(offsets))
        return found

    async def at_time(self, topic: str, meta: StreamMeta, timestamp_ms: int) -> int:
        """The first position written at or after `timestamp_ms` (the tail if none is)."""
        found = await self.reader.offset_for_time(topic, meta.partition, timestamp_ms)
        if found is None:
            return meta.next_offset
        return min(max(found, meta.history_start), meta.next_offset)

    async def located(self, topic: str, meta: StreamMeta, start: int, limit: int) -> list[Located]:
        """The records of up to `limit` messages from `start` on, in order: below the offset
        Kafka still holds from, as the cold tier's chunks keep them."""
        held_from = await self.reader.log_start(topic, meta.partition)
        out: list[Located] = []
        for segment in meta.segments():
            if segment.end <= start:
                continue
            begin = max(start, segment.start)
            wanted = limit - len(out)
            if begin < held_from:
                cold = await cold_answer(
                    self._cold_first(topic, meta, segment, begin, held_from, wanted)
                )
                out += [Located(segment.stream_id, position) for position in cold]
                begin, wanted = max(begin, held_from), limit - len(out)
            if wanted > 0 and begin < segment.end:
                found = await self._positions(
                    topic, meta.partition, segment, begin, segment.end, wanted
                )
                out += [Located(segment.stream_id, position) for position in found[:wanted]]
            if len(out) >= limit:
                break
        return out

    async def _cold_first(
        self, topic: str, meta: StreamMeta, segment: Segment, start: int, below: int, limit: int
    ) -> list[RecordPosition]:
        """Where the segment's first `limit` tiered messages in [start, below) were in Kafka."""
        place = self.path.place(topic, meta)
        ranges = [] if place is None else self.path.catalog.tier.ranges(place)
        found: list[RecordPosition] = []
        for tier_range in ranges:
            begin = max(segment.start, tier_range.start, start)
            stop = min(segment.end, tier_range.end, below)
            if begin < stop and len(found) < limit:
                messages = await self.path.cold.first(
                    tier_range, segment.stream_id, begin, stop, limit - len(found)
                )
                found += (
                    RecordPosition(m.offset, m.timestamp_ms, len(m.payload)) for m in messages
                )
        return found

    async def _last(
        self, topic: str, partition: int, segment: Segment, start: int, stop: int, keep: int
    ) -> deque[RecordPosition]:
        """The last `keep` records of the segment's stream in [start, stop) (all, if fewer)."""
        key = stream_key(segment.stream_id)
        found: deque[RecordPosition] = deque(maxlen=keep)
        while start < stop:
            batch, result = await self.reader.positions(
                ReadRequest(topic, partition, key, start, stop), keep
            )
            found += batch
            start = result.next_offset
        return found

    async def _positions(
        self,
        topic: str,
        partition: int,
        segment: Segment,
        start: int,
        stop: int,
        limit: int | None = None,
    ) -> list[RecordPosition]:
        """Every record of the segment's stream in [start, stop), or the first `limit`."""
        key = stream_key(segment.stream_id)
        found: list[RecordPosition] = []
        while start < stop and (limit is None or len(found) < limit):
            batch, result = await self.reader.positions(
                ReadRequest(topic, partition, key, start, stop)
            )
            found += batch
            start = result.next_offset
        return found
