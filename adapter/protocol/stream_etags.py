"""A stream's ETags: of its whole content (If-Match on append) and of a range read."""

from __future__ import annotations

from adapter.protocol.caching import etag
from adapter.protocol.model import StreamMeta
from adapter.protocol.offsets import encode


def stream_etag(meta: StreamMeta) -> str:
    """The stream's current ETag (If-Match on append compares against it)."""
    return range_etag(meta, meta.start_offset, meta.next_offset, meta.closed)


def range_etag(meta: StreamMeta, start: int, end: int, closed: bool) -> str:
    """The ETag of the stream's bytes in [start, end); a stream recreated under the same name
    starts at another offset, so its tags never collide with the old one's."""
    internal = f"{meta.bucket_id}/{meta.stream_id}@{meta.start_offset}"
    return etag(internal, encode(start), encode(end), closed)
