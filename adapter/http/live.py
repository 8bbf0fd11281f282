"""Live reads: long-poll (§5.7) and SSE (§5.8), both woken through the live hub."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from aiohttp import web

from adapter.http.auth import seconds_left
from adapter.http.peers import reader_of
from adapter.http.security import decorate
from adapter.http.sse_sink import TransportSink
from adapter.live.fanout import Fanout
from adapter.live.shared_reads import SharedReads
from adapter.live.tailers import Ending, Payload, Tailer
from adapter.log.errors import LogUnavailable
from adapter.protocol.caching import NO_CACHE, NO_STORE
from adapter.protocol.commands import Chunk, Read, StreamRef
from adapter.protocol.cursors import next_cursor, parse_cursor
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.model import StreamMeta
from adapter.protocol.offsets import ReadFrom, encode, resolve_start
from adapter.protocol.read_options import UNBOUNDED, Bounds
from adapter.protocol.snapshots import check_readable
from adapter.protocol.sse import (
    CONTENT_TYPE,
    ENCODING_HEADER,
    chunk_events,
    credential_expired_event,
    tail_events,
    uses_base64,
)
from adapter.service.stream_source import StreamSource
from adapter.service.streams import StreamService
from topology.errors import BrokerUnavailable

log = logging.getLogger(__name__)

SSE_BACKLOG_BYTES = 256 * 1024  # unsent bytes one SSE client may hold before it must drain
PARK_GRACE_S = 5.0  # the sweep ends parked sessions at their deadline; this only bounds it


@dataclass(frozen=True)
class LiveLimits:
    long_poll_timeout_s: float
    sse_max_duration_s: float
    sse_heartbeat_s: float
    sse_write_timeout_s: float


class ClientGone(Exception):
    """The SSE client disconnected or stopped reading: end the response."""


def poll_timeout(request: web.Request, limits: LiveLimits) -> float:
    """The configured wait, shortened by a `timeout` query parameter (seconds) if given."""
    raw = request.query.get("timeout")
    if raw is None:
        return limits.long_poll_timeout_s
    if not (raw.isascii() and raw.isdigit()):
        raise ProtocolError(ErrorCode.INVALID_QUERY, "timeout must be a whole number of seconds")
    return min(float(raw), limits.long_poll_timeout_s)


async def long_poll(
    request: web.Request,
    service: StreamService,
    source: StreamSource,
    reads: SharedReads,
    ref: StreamRef,
    start: ReadFrom,
    limits: LiveLimits,
    bounds: Bounds = UNBOUNDED,
) -> tuple[Chunk | None, StreamMeta, dict[str, str]]:
    """Wait for data at the position; return the chunk (None on timeout or closure)."""
    timeout_s = poll_timeout(request, limits)
    left = seconds_left(request)
    if left is not None:  # answer (204) by the time the token expires: the client renews it
        timeout_s = max(0.0, min(timeout_s, left))
    meta = source.accessed(ref, reader_of(request))
    position = resolve_start(meta, start)
    if position >= meta.next_offset and not meta.closed:
        meta = await service.wait_for_data(source, ref, position, timeout_s)
    cursor = {"Stream-Cursor": next_cursor(service.clock(), request.query.get("cursor"))}
    if position >= meta.next_offset:
        meta = await source.at_tail(ref)  # a 204 says up to date: of every acknowledged append
    if position >= meta.next_offset:
        return None, meta, cursor
    chunk = await reads.read(source, ref, position, bounds)  # one read for all woken here
    traced(service, "long-poll", chunk)
    return chunk, meta, cursor


def traced(service: StreamService, mode: str, chunk: Chunk) -> None:
    """With tracing on, a span for one reader's live delivery (a child of its request's),
    linked to the appends it carries."""
    if service.tracing is not None:
        ref = chunk.meta
        service.tracing.delivered(mode, (ref.bucket_id, ref.stream_id), chunk.traces, 1)


def empty_poll_response(meta: StreamMeta, cursor: dict[str, str]) -> web.Response:
    """204: nothing new before the timeout, or the stream is closed at this position."""
    headers = {
        "Stream-Next-Offset": encode(meta.next_offset),
        "Stream-Up-To-Date": "true",
        "Cache-Control": NO_STORE,
    }
    if meta.closed:
        headers["Stream-Closed"] = "true"
    else:
        headers |= cursor
    return web.Response(status=204, headers=headers)


async def sse(
    request: web.Request,
    service: StreamService,
    source: StreamSource,
    fanout: Fanout,
    ref: StreamRef,
    start: ReadFrom,
    limits: LiveLimits,
) -> web.StreamResponse:
    meta = source.accessed(ref, reader_of(request))
    check_readable(meta, start)  # 410 below the earliest offset, before the stream of events
    response = web.StreamResponse(status=200)
    response.headers["Content-Type"] = CONTENT_TYPE
    response.headers["Cache-Control"] = NO_CACHE
    # nginx (and proxies that honour the same header) buffer a proxied response by default,
    # which holds events back until the buffer fills or the response ends: this one must not be.
    response.headers["X-Accel-Buffering"] = "no"
    if uses_base64(meta.content_type):
        response.headers[ENCODING_HEADER] = "base64"
    decorate(response, request)
    await response.prepare(request)
    sink = TransportSink(request, response, SSE_BACKLOG_BYTES)
    session = _SseSession(request, sink, service, source, fanout, ref, limits)
    try:
        await session.run(resolve_start(meta, start), seconds_left(request))
        if session.credential_expired:
            await session.write(credential_expired_event(encode(session.position)))
    except (ClientGone, ConnectionResetError):
        return response
    except ProtocolError:
        pass  # the stream was deleted or expired while tailed: end the response
    except (LogUnavailable, BrokerUnavailable) as error:
        # Every event written is whole, so a clean end is safe: the client resumes from the
        # last control event's offset, as after the session's maximum duration.
        log.warning("ending an SSE session of %s early: %s", request.path, error)
    await response.write_eof()
    return response


class _SseSession:
    """One SSE response: catch up on its own, then park with the stream's broadcaster.

    Every data event goes out in one write with its control event.
    """

    def __init__(
        self,
        request: web.Request,
        sink: TransportSink,
        service: StreamService,
        source: StreamSource,
        fanout: Fanout,
        ref: StreamRef,
        limits: LiveLimits,
    ) -> None:
        self.sink = sink
        self.service = service
        self.source = source
        self.fanout = fanout
        self.ref = ref
        self.limits = limits
        self.cursor = parse_cursor(request.query.get("cursor"))
        self.announced = False
        self.position = 0  # the next offset the client has not been sent
        self.credential_expired = False  # the response ends because the caller's token does

    async def run(self, position: int, credential_left_s: float | None) -> None:
        loop = asyncio.get_running_loop()
        duration = self.limits.sse_max_duration_s
        token_bound = credential_left_s is not None and credential_left_s < duration
        if credential_left_s is not None and token_bound:
            duration = max(0.0, credential_left_s)
        deadline = loop.time() + duration
        while True:
            position, done = await self._catch_up(position)
            self.position = position
            if done:
                return
            if loop.time() >= deadline:
                self.credential_expired = token_bound
                return
            ending, position = await self._park(position, deadline)
            self.position = position
            if ending is Ending.GONE:
                raise ClientGone("the client disconnected")
            if ending is Ending.BEHIND:
                await self._drained()
            elif ending is not Ending.LOST:
                # closed (final event written), expired or shutting down
                self.credential_expired = token_bound and ending is Ending.EXPIRED
                return

    async def _catch_up(self, position: int) -> tuple[int, bool]:
        """Write until the client has every committed message; True once the stream closed."""
        while True:
            meta = self.source.existing(self.ref)
            if position < meta.next_offset:
                chunk = await self.source.read(Read(self.ref, position))
                events = chunk_events(chunk, self.service.clock())
                traced(self.service, "sse", chunk)
            elif meta.closed or not self.announced:
                if not meta.closed:
                    # `upToDate` of every acknowledged append: else the session ends, to resume
                    meta = await self.source.at_tail(self.ref)
                    if position < meta.next_offset:
                        continue  # one acknowledged elsewhere was followed just now: send it
                events = tail_events(position, meta.closed, self.service.clock())
            else:
                return position, False  # nothing awaited since `meta`: safe to park
            await self.write(events.for_client(self.cursor))  # data and control: one write
            position = events.position
            if events.closed:
                return position, True

    async def _park(self, position: int, deadline: float) -> tuple[Ending, int]:
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[Ending] = loop.create_future()
        tailer = Tailer(self.sink, position, self.cursor, deadline, loop.time(), ended)
        self.fanout.park(self.source, self.ref, tailer)
        try:
            async with asyncio.timeout(deadline - loop.time() + PARK_GRACE_S):
                return await ended, tailer.position
        except TimeoutError:
            return Ending.EXPIRED, tailer.position  # the sweep is late: end anyway
        finally:
            self.fanout.leave(self.ref, tailer)

    async def write(self, data: bytes) -> None:
        self.announced = True
        ending = self.sink.send(Payload(data))
        if ending is Ending.GONE:
            raise ClientGone("the client disconnected")
        if ending is Ending.BEHIND:
            await self._drained()

    async def _drained(self) -> None:
        """A client that does not read its backlog in time is dropped: it resumes later."""
        if not await self.sink.drained(self.limits.sse_write_timeout_s):
            self.sink.abort()
            raise ClientGone("the client did not read in time")
