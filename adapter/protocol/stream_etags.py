"""A stream's ETags: of its whole content (If-Match on append) and of a range read."""

from __future__ import annotations

from adapter.protocol.caching import etag
from adapter.protocol.model import StreamMeta
from adapter.protocol.offsets import encode


def stream_etag(meta: StreamMeta) -> str:
    """The stream's current ETag (If-Match on append compares against it). A trim or a
    snapshot that moved the earliest readable offset changes it too: what a GET from the
    start answers changed, so a HEAD with the old tag in If-None-Match must not answer 304."""
    moved = f"~{meta.earliest_offset}" if meta.retains else ""
    internal = _identity(meta) + moved
    return etag(internal, encode(meta.start_offset), encode(meta.next_offset), meta.closed)


def range_etag(meta: StreamMeta, start: int, end: int, closed: bool) -> str:
    """The ETag of the stream's bytes in [start, end); a stream recreated under the same name
    starts at another offset, so its tags never collide with the old one's."""
    return etag(_identity(meta), encode(start), encode(end), closed)


def _identity(meta: StreamMeta) -> str:
    return f"{meta.bucket_id}/{meta.stream_id}@{meta.start_offset}"
