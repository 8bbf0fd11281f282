"""Stream sources: where a bucket's streams come from, behind the operations a request uses.

Two kinds of bucket hold streams: our own, one stream per partition range of the bucket's topic,
driven through the stream state machine (`native_streams.py`, `streams.py`); and mounted
topics, one stream per record key, read through the topic's key index
(`mounted_streams.py`). `StreamService.source_for` picks a bucket's source once per request;
the request's handler then asks only that source, so nothing else branches on the kind of
bucket. What a source cannot do it refuses with the protocol's error: a mounted topic's
streams take no creation, deletion, fence, trim or snapshot, and appends only when the mount
says so.
"""

from __future__ import annotations

from typing import Protocol

from adapter.cluster.access_relay import Reader
from adapter.protocol.commands import Append, Appended, Chunk, Read, StreamRef
from adapter.protocol.model import StreamMeta


class StreamSource(Protocol):
    """The streams of one kind of bucket, as a request reads and appends to them."""

    def existing(self, ref: StreamRef) -> StreamMeta:
        """The stream (404 unknown or expired, 410 deleted, 503 not servable yet); not an
        access: a `HEAD` is answered from it."""
        ...

    def accessed(self, ref: StreamRef, reader: Reader | None = None) -> StreamMeta:
        """The stream as `existing`, for a read served here: its sliding TTL starts again.
        `reader` is given once per request, by the edge."""
        ...

    def check_change(self, ref: StreamRef) -> None:
        """Refuse (raise) a change of the stream other than an append, where its source takes
        none: a creation, deletion, fence, trim or snapshot."""
        ...

    async def append(self, command: Append) -> Appended: ...

    async def read(self, command: Read, reader: Reader | None = None) -> Chunk:
        """A catch-up read, bounded as the command says; `reader` as `accessed` takes it."""
        ...

    async def offset_at(self, ref: StreamRef, at_ms: int) -> int:
        """Where a read by time starts: the stream's first message appended at or after
        `at_ms` (its tail if none was). Not an access: the read that follows is one."""
        ...

    async def latest(self, ref: StreamRef) -> StreamMeta:
        """The stream as `existing` (not an access), at the tail of every append acknowledged
        before now as far as that can be told: what a `HEAD` answers."""
        ...

    async def at_tail(self, ref: StreamRef) -> StreamMeta:
        """Before answering that the stream has nothing past its tail (a long-poll's 204, an
        SSE session's `upToDate`, a bootstrap): the stream, as it is once every append
        acknowledged before now is known here (503 when that cannot be told)."""
        ...
