"""Live reads: long-poll (§5.7) and SSE (§5.8), both woken through the live hub."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from aiohttp import web

from adapter.http.security import decorate
from adapter.protocol.caching import NO_CACHE, NO_STORE
from adapter.protocol.commands import Chunk, Read, StreamRef
from adapter.protocol.cursors import next_cursor
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.offsets import ReadFrom, encode
from adapter.protocol.sse import (
    CONTENT_TYPE,
    ENCODING_HEADER,
    HEARTBEAT,
    control_event,
    data_event,
    uses_base64,
)
from adapter.service.reads import resolve_start
from adapter.service.streams import StreamService
from adapter.state.records import StreamMeta


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
    ref: StreamRef,
    start: ReadFrom,
    limits: LiveLimits,
) -> tuple[Chunk | None, StreamMeta, dict[str, str]]:
    """Wait for data at the position; return the chunk (None on timeout or closure)."""
    timeout_s = poll_timeout(request, limits)
    meta = service.live(ref)
    position = resolve_start(meta, start)
    if position >= meta.next_offset and not meta.closed:
        meta = await service.wait_for_data(ref, position, timeout_s)
    cursor = {"Stream-Cursor": next_cursor(service.clock(), request.query.get("cursor"))}
    if position >= meta.next_offset:
        return None, meta, cursor
    return await service.read(Read(ref, position)), meta, cursor


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
    ref: StreamRef,
    start: ReadFrom,
    limits: LiveLimits,
) -> web.StreamResponse:
    meta = service.live(ref)
    response = web.StreamResponse(status=200)
    response.headers["Content-Type"] = CONTENT_TYPE
    response.headers["Cache-Control"] = NO_CACHE
    if uses_base64(meta.content_type):
        response.headers[ENCODING_HEADER] = "base64"
    decorate(response, request)
    await response.prepare(request)
    session = _SseSession(request, response, service, ref, limits)
    try:
        await session.run(resolve_start(meta, start))
    except (ClientGone, ConnectionResetError):
        return response
    except ProtocolError:
        pass  # the stream was deleted or expired while tailed: end the response
    await response.write_eof()
    return response


class _SseSession:
    """One SSE response: catch up, then tail, pairing every data event with a control event."""

    def __init__(
        self,
        request: web.Request,
        response: web.StreamResponse,
        service: StreamService,
        ref: StreamRef,
        limits: LiveLimits,
    ) -> None:
        self.request = request
        self.response = response
        self.service = service
        self.ref = ref
        self.limits = limits

    async def run(self, position: int) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.limits.sse_max_duration_s
        announced = False
        while loop.time() < deadline:
            meta = self.service.live(self.ref)
            if position < meta.next_offset:
                position, done = await self._send_chunk(position)
                if done:
                    return
                announced = True
                continue
            if meta.closed:
                await self._write(control_event(encode(position), None, True, True))
                return
            if not announced:
                await self._write(self._control(position, up_to_date=True))
                announced = True
            wait_s = min(self.limits.sse_heartbeat_s, deadline - loop.time())
            before = meta.next_offset
            meta = await self.service.wait_for_data(self.ref, position, wait_s)
            if meta.next_offset == before and not meta.closed:
                await self._write(HEARTBEAT)

    async def _send_chunk(self, position: int) -> tuple[int, bool]:
        chunk = await self.service.read(Read(self.ref, position))
        closed = chunk.meta.closed and chunk.up_to_date
        events = data_event(chunk.meta.content_type, chunk.messages) if chunk.messages else b""
        if closed:
            events += control_event(encode(chunk.next_offset), None, True, True)
        else:
            events += self._control(chunk.next_offset, chunk.up_to_date)
        await self._write(events)  # one write: a data event never arrives without its control
        return chunk.next_offset, closed

    def _control(self, position: int, up_to_date: bool) -> bytes:
        cursor = next_cursor(self.service.clock(), self.request.query.get("cursor"))
        return control_event(encode(position), cursor, up_to_date, closed=False)

    async def _write(self, data: bytes) -> None:
        """A write that outlives the timeout means a client not reading: drop it, it resumes."""
        try:
            await asyncio.wait_for(self.response.write(data), self.limits.sse_write_timeout_s)
        except TimeoutError as error:
            raise ClientGone("the client did not read in time") from error
