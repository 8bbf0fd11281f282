"""SSE fan-out: one broadcaster per tailed stream reads each change once and writes it to all.

SSE sessions that have caught up park here as `Tailer`s instead of waiting one by one. When
the hub reports a change, the stream's feed reads the new chunk once per distinct position
(the hot tail, normally), renders the data and control events once, and writes the same
bytes to every parked client without awaiting anything per client. One sweep a second for
the whole instance sends heartbeats, ends responses at their maximum duration and notices
clients that disconnected. A client that holds too much unsent data is handed back to its
handler (`Ending.BEHIND`), which waits a bounded time for it to drain or drops it.

The feeds' deliveries and the sweep are jobs of the fan-out's task group: each ends when
nothing is left to deliver or sweep, and closing the fan-out ends them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable

from adapter.live.shared_reads import SharedReads
from adapter.live.tailers import Ending, Payload, Tailer
from adapter.log.errors import LogUnavailable
from adapter.protocol.commands import Chunk, StreamRef
from adapter.protocol.errors import ProtocolError
from adapter.protocol.sse import HEARTBEAT, Events, chunk_events, tail_events
from adapter.service.stream_source import StreamSource
from adapter.service.streams import StreamService
from adapter.tasks import Kind, Tasks

READ_TIMEOUT_S = 30.0  # the reader bounds its Kafka calls itself; this bounds the await
SWEEP_S = 1.0
SLICE = 25  # writes between two yields to the event loop, so one change never hogs it


class StreamFeed:
    """The parked sessions of one stream and the task that brings them each change."""

    def __init__(
        self,
        source: StreamSource,
        ref: StreamRef,
        reads: SharedReads,
        tasks: Tasks,
        on_empty: Callable[[StreamFeed], None],
    ) -> None:
        self.source = source  # the stream's bucket's, as the request that made the feed chose it
        self.ref = ref
        self.reads = reads
        self.tasks = tasks
        self.service = reads.service
        self.tailers: dict[Tailer, None] = {}  # insertion-ordered set
        self._on_empty = on_empty
        self._dirty = False
        self._task: asyncio.Task[None] | None = None

    def changed(self) -> None:
        """The hub's listener: deliver on the next loop turn (one task at a time)."""
        self._dirty = True
        if self._task is None and self.tailers:
            name = f"sse-{self.ref.bucket_id}/{self.ref.stream_id}"
            self._task = self.tasks.spawn(self._pump(), name, Kind.JOB)

    def drop(self, tailer: Tailer, why: Ending) -> None:
        tailer.end(why)
        if tailer in self.tailers:
            del self.tailers[tailer]
            if not self.tailers:
                self._on_empty(self)

    def end_all(self, why: Ending) -> None:
        for tailer in list(self.tailers):
            self.drop(tailer, why)

    async def _pump(self) -> None:
        try:
            while self._dirty and self.tailers:
                self._dirty = False
                await self._deliver()
        except (ProtocolError, LogUnavailable, TimeoutError):
            self.end_all(Ending.LOST)  # deleted, expired or unreadable: handlers decide
        except BaseException:
            self.end_all(Ending.LOST)  # never leave a waiter hanging on a dead task
            raise
        finally:
            self._task = None

    async def _deliver(self) -> None:
        meta = self.source.existing(self.ref)
        groups: dict[int, list[Tailer]] = {}
        for tailer in self.tailers:
            groups.setdefault(tailer.position, []).append(tailer)
        for position, group in groups.items():
            if position < meta.next_offset:
                async with asyncio.timeout(READ_TIMEOUT_S):
                    chunk = await self.reads.read(self.source, self.ref, position)
                await self._send(chunk_events(chunk, self.service.clock()), group)
                self._traced(chunk, len(group))
            elif meta.closed:
                await self._send(tail_events(position, True, self.service.clock()), group)

    def _traced(self, chunk: Chunk, readers: int) -> None:
        """With tracing on, a span for the delivery, linked to the appends it carries: a trace
        of its own, since no request of those readers' is current here."""
        tracing = self.service.tracing
        if tracing is not None:
            ref = self.ref
            tracing.delivered("sse", (ref.bucket_id, ref.stream_id), chunk.traces, readers, True)

    async def _send(self, events: Events, group: list[Tailer]) -> None:
        shared = Payload(events.shared)
        if events.closed:
            for tailer in group:
                tailer.position = events.position
            self._send_all(group, shared, Ending.CLOSED)
            return
        if not events.up_to_date:
            self._dirty = True  # the read stopped at its size limit: more to come
        loop = asyncio.get_running_loop()
        for index, tailer in enumerate(group):
            if index % SLICE == 0 and index:
                await asyncio.sleep(0)  # let appends (and the writer's thread) in between
            if tailer not in self.tailers:
                continue  # it left while we yielded
            payload = shared
            if not events.shared_by(tailer.cursor):  # §8.1 jitter: a control event of its own
                payload = Payload(events.for_client(tailer.cursor))
            tailer.position = events.position
            self.write(tailer, payload, loop.time())

    def _send_all(self, group: list[Tailer], payload: Payload, then: Ending) -> None:
        now = asyncio.get_running_loop().time()
        for tailer in group:
            if self.write(tailer, payload, now):
                self.drop(tailer, then)

    def write(self, tailer: Tailer, payload: Payload, now: float) -> bool:
        """Write without waiting; False if the tailer had to be dropped."""
        why = tailer.sink.send(payload)
        tailer.written_at = now
        if why is not None:
            self.drop(tailer, why)
        return why is None

    def sweep(self, now: float, heartbeat_s: float, heartbeat: Payload) -> None:
        """Heartbeats, deadlines, departures; and the stream is still there (a read: TTL)."""
        try:
            self.source.accessed(self.ref)
        except ProtocolError:
            self.end_all(Ending.LOST)  # deleted or expired: the handlers end their responses
            return
        for tailer in list(self.tailers):
            if tailer.sink.gone():
                self.drop(tailer, Ending.GONE)
            elif now >= tailer.deadline:
                self.drop(tailer, Ending.EXPIRED)
            elif now - tailer.written_at >= heartbeat_s:
                self.write(tailer, heartbeat, now)


class Fanout:
    """Every stream's feed on this instance, and the sweep over all parked sessions."""

    def __init__(self, service: StreamService, heartbeat_s: float, tasks: Tasks) -> None:
        self.service = service
        self.tasks = tasks
        self.reads = SharedReads(service)
        self.heartbeat_s = heartbeat_s
        self._heartbeat = Payload(HEARTBEAT)
        self._feeds: dict[Hashable, StreamFeed] = {}
        self._sweeper: asyncio.Task[None] | None = None

    def park(self, source: StreamSource, ref: StreamRef, tailer: Tailer) -> None:
        """Register a session that has every committed message up to `tailer.position`.

        The caller must not have yielded since it saw the stream's tail, so no change is
        missed between its check and this registration.
        """
        key = (ref.bucket_id, ref.stream_id)
        feed = self._feeds.get(key)
        if feed is None:
            feed = self._feeds[key] = StreamFeed(source, ref, self.reads, self.tasks, self._forget)
            self.service.hub.listen(key, feed.changed)
        feed.tailers[tailer] = None
        if self._sweeper is None:
            self._sweeper = self.tasks.spawn(self._sweep(), "sse-sweeper", Kind.JOB)

    def leave(self, ref: StreamRef, tailer: Tailer) -> None:
        feed = self._feeds.get((ref.bucket_id, ref.stream_id))
        if feed is not None and tailer in feed.tailers:
            feed.drop(tailer, Ending.GONE)

    def end_sessions(self) -> None:
        """The server is stopping: hand every parked session back so its response ends."""
        for feed in list(self._feeds.values()):
            feed.end_all(Ending.SHUTDOWN)

    async def close(self) -> None:
        """End every session, then the deliveries and the sweep."""
        self.end_sessions()
        await self.tasks.close()

    @property
    def tailers(self) -> int:
        return sum(len(feed.tailers) for feed in self._feeds.values())

    def _forget(self, feed: StreamFeed) -> None:
        key = (feed.ref.bucket_id, feed.ref.stream_id)
        if self._feeds.get(key) is feed:
            del self._feeds[key]
            self.service.hub.listen(key, None)

    async def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        period = min(SWEEP_S, self.heartbeat_s)
        try:
            while self._feeds:
                await asyncio.sleep(period)
                now = loop.time()
                for feed in list(self._feeds.values()):
                    feed.sweep(now, self.heartbeat_s, self._heartbeat)
        finally:
            self._sweeper = None
