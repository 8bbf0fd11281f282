"""Catch-up reads: where a read starts, and how far it may go, for one stream."""

from __future__ import annotations

from adapter.log.hot_cache import HotCache
from adapter.log.reader import LogReader, ReadRequest
from adapter.protocol.commands import Chunk
from adapter.protocol.offsets import ReadFrom, Start
from adapter.state.records import StreamMeta
from topology.wire import stream_key


class ReadPath:
    """Reads come from the hot tail when it holds the whole range, else from Kafka."""

    def __init__(self, reader: LogReader, cache: HotCache) -> None:
        self.reader = reader
        self.cache = cache

    async def read(self, topic: str, meta: StreamMeta, start: ReadFrom) -> Chunk:
        first = resolve_start(meta, start)
        key = (meta.bucket_id, meta.stream_id)
        result = self.cache.read(key, first, meta.next_offset, self.reader.limits.max_read_bytes)
        if result is None:
            record_key = stream_key(meta.stream_id)
            request = ReadRequest(topic, meta.partition, record_key, first, meta.next_offset)
            result = await self.reader.read(request)
        return Chunk(meta, result.messages, first, result.next_offset, result.complete)


def resolve_start(meta: StreamMeta, start: ReadFrom) -> int:
    """The Kafka offset a read begins at. Positions before the stream began mean its start."""
    if isinstance(start, Start):
        return meta.start_offset if start is Start.BEGINNING else meta.next_offset
    return max(start, meta.start_offset)
