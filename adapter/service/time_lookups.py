"""Reads by time: the offset of a stream's first message appended at or after a moment.

Kafka answers which record of the partition was written first at or after it (ListOffsets by
time); a bucket topic's partition holds many streams, so the answer is the stream's first
message at or after that record, found in the hot tail or by a scan of the partition bounded
like a read's (at most `max_scan_bytes` in all, then the position reached). Records Kafka has
freed once tiered keep their timestamps in their cold chunks (`schemas/tier_message.avsc`), so
a moment before what Kafka holds is looked up there: by bisecting the stream's chunks, then
one chunk's blocks, by time, so its cost grows with the logarithm of what was tiered. It is
not cut short by `max_scan_bytes` like the scan: stopped inside the chunks, it could not name
a position with no message of the stream between it and the answer. The same search by offset
alone (`first_at_or_after`) tells a trim past a snapshot whether it removes any message.
"""

from __future__ import annotations

from adapter.log.errors import BelowLogStart
from adapter.log.reader import Budget, ReadRequest
from adapter.objects.base import ObjectStoreError
from adapter.protocol.model import Segment, StreamMeta
from adapter.protocol.snapshots import gone_before
from adapter.service.cold_spans import ColdSpan, cold_spans
from adapter.service.reads import ReadPath, cold_answer
from adapter.tier.chunks import ColdMessage
from adapter.tier.cold import ChunkCollected, Wanted
from adapter.tier.manifest import Place
from topology.wire import owner_of_key, stream_key

# Instances writing and tiering a partition may disagree on the time by this much: a range
# tiered this long before a moment holds no record written at or after it.
CLOCK_SKEW_MS = 60_000


class TimeLookups:
    def __init__(self, path: ReadPath) -> None:
        self.path = path

    async def offset_at(self, topic: str, meta: StreamMeta, at_ms: int) -> int:
        """The offset of the stream's first message appended at or after `at_ms` (its tail if
        none was); 410 when that message may be one its snapshot removed."""
        held = await self.path.reader.held_since(topic, meta.partition, at_ms)
        floor = meta.next_offset if held.offset is None else held.offset
        place = self.path.place(topic, meta)
        tiered_to = None if place is None else self.path.catalog.tier.tiered_to(place)
        found, blind = None, held.offset is not None and held.offset <= held.earliest
        if place is not None and tiered_to is not None and floor <= tiered_to:
            found, blind = await cold_answer(self._in_cold(place, meta, at_ms, floor))
        if found is None:
            found = await self._first_from(topic, meta, max(floor, tiered_to or 0))
        _check_retained(meta, found, blind)
        return min(max(found, meta.history_start), meta.next_offset)

    async def first_at_or_after(self, topic: str, meta: StreamMeta, start: int) -> int:
        """The offset of the stream's first message at or after `start` (its tail if none
        is), from the cold tier where it is tiered; or a position with no message of the
        stream between `start` and it: the scan's bound spent, or at worst `start` itself when
        what lies there cannot be looked at now (a collected chunk met, the store or Kafka's
        freed records out of reach)."""
        place = self.path.place(topic, meta)
        tiered_to = None if place is None else self.path.catalog.tier.tiered_to(place)
        try:
            if place is not None and tiered_to is not None and start <= tiered_to:
                spans = [
                    span
                    for span in cold_spans(self.path.catalog.tier.ranges(place), meta)
                    if span.stop > start
                ]
                stored = [span for span in spans if not span.collected]
                found = await self._first_wanted(stored, lambda message: message.offset >= start)
                below = meta.next_offset if found is None else found
                if any(span.collected and span.start < below for span in spans):
                    return start
                if found is not None:
                    return found
            return await self._first_from(topic, meta, max(start, tiered_to or 0))
        except (ObjectStoreError, ChunkCollected, BelowLogStart):
            return start

    async def _in_cold(
        self, place: Place, meta: StreamMeta, at_ms: int, floor: int
    ) -> tuple[int | None, bool]:
        """The stream's first tiered message written at or after `at_ms` or lying at or after
        `floor`, if one is; and whether a collected chunk of the stream was met before it (its
        messages' times are unknown). The spans are bisected by their last message, then the
        one holding the answer by its blocks: a few GETs however much was tiered."""
        spans = [
            span
            for span in cold_spans(self.path.catalog.tier.ranges(place), meta)
            if span.tier_range.end > floor or span.tier_range.tiered_at_ms >= at_ms - CLOCK_SKEW_MS
        ]  # the others were tiered before the moment: every record in them was written earlier

        def wanted(message: ColdMessage) -> bool:
            return message.timestamp_ms >= at_ms or message.offset >= floor

        stored = [span for span in spans if not span.collected]
        found = await self._first_wanted(stored, wanted)
        below = meta.next_offset if found is None else found
        return found, any(span.collected and span.start < below for span in spans)

    async def _first_wanted(self, spans: list[ColdSpan], wanted: Wanted) -> int | None:
        """The first wanted message of `spans` (in offset order), bisecting them by their
        last message: wanted ones follow all the others (times grow with offsets)."""
        cold, low, high = self.path.cold, 0, len(spans)
        while low < high:  # the first span holding a wanted message is in [low, high]
            middle = (low + high) // 2
            span = spans[middle]
            last = await cold.last_in(span.tier_range, span.stream_id, span.start, span.stop)
            if last is not None and wanted(last):
                high = middle
            else:
                low = middle + 1
        if low == len(spans):
            return None
        span = spans[low]
        return await cold.first_at(span.tier_range, span.stream_id, span.start, span.stop, wanted)

    async def _first_from(self, topic: str, meta: StreamMeta, start: int) -> int:
        """The offset of the stream's first message at or after `start` (its tail if none),
        looked for in at most `max_scan_bytes` of the partition, as one read scans: when that
        is spent first, the position reached. No message of the stream lies between `start`
        and it, so a read (or a trim) from there is the same as from that message."""
        left = self.path.reader.limits.max_scan_bytes
        for segment in meta.segments():
            position = max(start, segment.start)
            while position < segment.end:
                if left <= 0:
                    return position
                found, position, scanned = await self._first_in(
                    topic, meta, segment, position, left
                )
                if found:
                    return position
                left -= scanned
        return meta.next_offset

    async def _first_in(
        self, topic: str, meta: StreamMeta, segment: Segment, start: int, scan_bytes: int
    ) -> tuple[bool, int, int]:
        """(True, its offset, _) for the segment's first message from `start`, from the hot tail
        or Kafka; else (False, where the next look goes on, what the scan cost of its bound)."""
        hot_key = owner_of_key(meta.data_bucket, segment.stream_id)
        held = self.path.cache.first_offset(hot_key, start, segment.end)
        if held is not None:
            return held < segment.end, held, 0
        key = stream_key(segment.stream_id)
        one = Budget(messages=1)
        request = ReadRequest(
            topic, meta.partition, key, start, segment.end, budget=one, scan_bytes=scan_bytes
        )
        positions, result = await self.path.reader.positions(request)
        if positions:
            return True, positions[0].offset, result.scanned
        return False, result.next_offset, result.scanned


def _check_retained(meta: StreamMeta, offset: int, blind: bool) -> None:
    """410 when the moment may name messages a snapshot or a trim removed: its first message
    then is below the earliest offset, or the lookup could not see what lay before it
    (`blind`: Kafka's answer was the oldest record it holds, with no cold chunk before it, or a
    collected chunk was met)."""
    earliest = meta.earliest_offset
    if earliest <= meta.history_start:
        return
    if offset < earliest or blind:
        raise gone_before(meta)
