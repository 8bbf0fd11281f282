"""Catch-up reads: where a read starts, and how far it may go, for one stream.

A stream's history is a list of ranges of its partition (`StreamMeta.segments`): a fork's
inherited ranges of its sources' records, then its own. A read walks them in order, jumping
the gaps between them, so offsets of a fork are the same tokens as its source's below the
fork point.
"""

from __future__ import annotations

from adapter.log.hot_cache import HotCache
from adapter.log.reader import LogReader, ReadRequest, ReadResult
from adapter.protocol.commands import Chunk
from adapter.protocol.offsets import ReadFrom, Start
from adapter.protocol.snapshots import check_readable
from adapter.state.records import Segment, StreamMeta
from topology.wire import stream_key


class ReadPath:
    """Reads come from the hot tail when it holds the whole range, else from Kafka."""

    def __init__(self, reader: LogReader, cache: HotCache) -> None:
        self.reader = reader
        self.cache = cache

    async def read(self, topic: str, meta: StreamMeta, start: ReadFrom) -> Chunk:
        """Messages from `start` on (410 below the earliest retained offset)."""
        check_readable(meta, start)
        first = position = resolve_start(meta, start)
        messages: list[bytes] = []
        size = 0
        for segment in meta.segments():
            if segment.end <= position:
                continue
            position = max(position, segment.start)
            result = await self._read(topic, meta, segment, position)
            messages += result.messages
            size += sum(len(message) for message in result.messages)
            position = result.next_offset
            if not result.complete or size >= self.reader.limits.max_read_bytes:
                break
        return Chunk(meta, messages, first, position, position >= meta.next_offset)

    async def _read(self, topic: str, meta: StreamMeta, segment: Segment, start: int) -> ReadResult:
        """One range of the history, from the hot tail if it holds it all, else from Kafka."""
        key = (meta.bucket_id, segment.stream_id)
        limit = self.reader.limits.max_read_bytes
        result = self.cache.read(key, start, segment.end, limit)
        if result is None:
            record_key = stream_key(segment.stream_id)
            request = ReadRequest(topic, meta.partition, record_key, start, segment.end)
            result = await self.reader.read(request)
        return result


def resolve_start(meta: StreamMeta, start: ReadFrom) -> int:
    """The Kafka offset a read begins at. Positions before the stream began mean its start."""
    if isinstance(start, Start):
        return meta.history_start if start is Start.BEGINNING else meta.next_offset
    return max(start, meta.history_start)
