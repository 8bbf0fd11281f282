"""An SSE client's connection as the fan-out sees it: non-blocking writes with a bounded backlog."""

from __future__ import annotations

import asyncio

from aiohttp import web

from adapter.live.tailers import Ending, Payload


class TransportSink:
    """Writes straight to the transport, as aiohttp's own writer does, in HTTP/1.1 chunks.

    Nothing awaits per write: the bytes go to the socket or the transport's buffer. Past
    `limit_bytes` unsent the client is BEHIND, and its handler decides how long to wait.
    """

    def __init__(self, request: web.Request, response: web.StreamResponse, limit_bytes: int):
        self._transport = request.transport
        self._chunked = response.headers.get("Transfer-Encoding") == "chunked"
        self.limit_bytes = limit_bytes

    def send(self, payload: Payload) -> Ending | None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return Ending.GONE
        transport.write(payload.chunked if self._chunked else payload.raw)
        return Ending.BEHIND if transport.get_write_buffer_size() > self.limit_bytes else None

    def gone(self) -> bool:
        return self._transport is None or self._transport.is_closing()

    async def drained(self, timeout_s: float) -> bool:
        """Wait (polling: only slow clients get here) until half the limit is left unsent."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not self.gone() and self.backlog() > self.limit_bytes // 2:
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.02)
        return not self.gone()

    def abort(self) -> None:
        """Drop the connection and its unsent backlog (a slow client resumes by reconnecting)."""
        if self._transport is not None:
            self._transport.abort()

    def backlog(self) -> int:
        return 0 if self._transport is None else self._transport.get_write_buffer_size()
