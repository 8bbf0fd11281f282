"""The aiohttp internals `adapter/http/aiohttp_internals.py` relies on still exist and behave
as relied on: an aiohttp release that changes one fails here, each test naming it."""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
import socket
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import attr
import pytest
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.streams import StreamReader
from aiohttp.web_protocol import RequestHandler, _ErrInfo

from adapter.http.aiohttp_internals import (
    WrappingRunner,
    current_request,
    end_linger,
    handler_settings,
    has_queued,
    queued_parse_error,
    refuse_head,
    set_read_body,
    set_site_server,
    stop_lingering,
    waiting_for_head,
)

Served = tuple[web.Server, int]
Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]


class _Late(HttpProcessingError):
    code = 408
    message = "late"


async def _serve(handler: Handler, **settings: Any) -> AsyncIterator[Served]:
    server = web.Server(handler, **settings)
    runner = web.ServerRunner(server)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield server, int(runner.addresses[0][1])
    finally:
        await runner.cleanup()


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the condition never held")


async def _answer(reader: asyncio.StreamReader) -> bytes:
    return await asyncio.wait_for(reader.read(), 10)


async def _echo_internals(request: web.BaseRequest) -> web.Response:
    """What the internals say of the connection while this request is handled, once a
    refusal of the parser's is queued behind it."""
    handler = request.protocol
    assert isinstance(handler, RequestHandler)
    await _until(lambda: queued_parse_error(handler) is not None)
    seen = [
        f"current={current_request(handler) is request}",
        f"queued={has_queued(handler)}",
        f"error={type(queued_parse_error(handler)).__name__}",
    ]
    return web.Response(text=" ".join(seen))


@pytest.fixture
async def echoing() -> AsyncIterator[Served]:
    async for served in _serve(_echo_internals):
        yield served


async def test_the_handler_has_the_private_state_relied_on() -> None:
    """`_messages`, `_waiter`, `_current_request` and `_lingering_time`, as declared."""
    server = web.Server(_echo_internals, lingering_time=3)
    handler = server()
    assert isinstance(handler._messages, deque)
    assert not has_queued(handler)
    assert handler._waiter is None
    assert not waiting_for_head(handler)
    assert handler._current_request is None
    assert current_request(handler) is None
    assert handler._lingering_time == 3.0
    stop_lingering(handler)
    assert handler._lingering_time == 0.0


def test_a_queued_refusal_has_the_shape_relied_on() -> None:
    """`_ErrInfo(status, exc, message)`, positionally, as the parser queues it."""
    assert [field.name for field in attr.fields(_ErrInfo)] == ["status", "exc", "message"]
    error = _Late()
    info = _ErrInfo(408, error, "late")
    assert (info.status, info.exc, info.message) == (408, error, "late")


async def test_a_refused_head_is_answered_by_the_request_loop(echoing: Served) -> None:
    """An idle connection is `waiting_for_head`; `refuse_head` wakes its request loop, which
    answers the refusal with the error's status, as it does the parser's own."""
    server, port = echoing
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        await _until(lambda: len(server.connections) == 1)
        handler = server.connections[0]
        await _until(lambda: waiting_for_head(handler))
        refuse_head(handler, _Late())
        assert (await _answer(reader)).startswith(b"HTTP/1.0 408 ")
    finally:
        writer.close()


async def test_a_parse_error_is_queued_behind_the_request_handled(echoing: Served) -> None:
    """A malformed request after one being handled: while the first is handled, it is the
    current request and the parser's refusal waits queued behind it."""
    server, port = echoing
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        await _until(lambda: len(server.connections) == 1)
        handler = server.connections[0]
        await _until(lambda: current_request(handler) is not None)
        writer.write(b"GET /\x00 HTTP/1.1\r\n\r\n")
        answer = await _answer(reader)
    finally:
        writer.close()
    assert b"current=True queued=True error=InvalidURLError" in answer


async def _decoded(request: web.BaseRequest) -> web.Response:
    await request.content.read()
    set_read_body(request, b'{"decoded": true}')
    return web.json_response({"read": (await request.read()).decode(), **await request.json()})


async def test_the_body_read_is_the_one_set() -> None:
    """`_read_bytes` is what `read()` and `json()` answer once the body is consumed."""
    async for _, port in _serve(_decoded):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        body = b"coded"
        head = b"POST / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        writer.write(head + b"Content-Length: 5\r\n\r\n" + body)
        answer = await _answer(reader)
        writer.close()
        assert b'{"read": "{\\"decoded\\": true}", "decoded": true}' in answer


async def test_a_linger_ends_once_its_body_is_ended(caplog: pytest.LogCaptureFixture) -> None:
    """A request answered before its body is all sent leaves the request loop lingering over
    the rest (up to `lingering_time`); `end_linger` on that body ends the linger at once,
    quietly, and the connection closes (an end the server's shutdown then need not wait for)."""
    bodies: list[StreamReader] = []

    async def unread(request: web.BaseRequest) -> web.Response:
        bodies.append(request.content)
        return web.Response(text="early")

    async for _, port in _serve(unread, lingering_time=60):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nabc")
            await asyncio.wait_for(reader.readuntil(b"early"), 10)
            await asyncio.sleep(0.2)  # lingering by now
            assert not reader.at_eof()
            assert end_linger(bodies[0])
            assert await _answer(reader) == b""  # closed, not 60 s later
            assert not end_linger(bodies[0])  # nothing left to end
        finally:
            writer.close()
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


class _Wrapping(WrappingRunner):
    def wrap(self, made: web.Server) -> web.Server:
        self.made = made
        return web.Server(made.request_handler, marker=handler_settings(made))


async def test_the_runner_serves_the_server_wrapped() -> None:
    """`AppRunner._make_server` makes the app's server (with the app's handler settings in
    `_kwargs`), and the runner serves what the override returns."""
    assert inspect.iscoroutinefunction(web.AppRunner._make_server)
    app = web.Application(handler_args={"lingering_time": 2.5})
    runner = _Wrapping(app)
    await runner.setup()
    try:
        assert runner.server is not None
        assert runner.server is not runner.made
        assert handler_settings(runner.made)["lingering_time"] == 2.5
        assert handler_settings(runner.server)["marker"]["lingering_time"] == 2.5
    finally:
        await runner.cleanup()


class _Listener:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.closed = False

    @property
    def sockets(self) -> tuple[socket.socket, ...]:
        return (self.sock,)

    def close(self) -> None:
        self.closed = True


class _Site(web.BaseSite):
    def __init__(self, runner: web.BaseRunner, listener: _Listener) -> None:
        super().__init__(runner)
        self.listener = listener

    @property
    def name(self) -> str:
        return "listener"

    async def start(self) -> None:
        await super().start()
        set_site_server(self, self.listener)


async def test_a_site_stops_the_listener_set() -> None:
    """`BaseSite._server` is what the runner lists the addresses of and the site closes."""
    runner = web.ServerRunner(web.Server(_echo_internals))
    await runner.setup()
    with socket.create_server(("127.0.0.1", 0)) as sock:
        listener = _Listener(sock)
        site = _Site(runner, listener)
        await site.start()
        assert runner.addresses == [sock.getsockname()]
        await site.stop()
        assert listener.closed
    await runner.cleanup()


# The private names of aiohttp's the product uses; none is used outside the one module.
_PRIVATE = re.compile(
    r"\._(messages|waiter|current_request|lingering_time|make_server|kwargs|read_bytes"
    r"|ssl_context|backlog|runner|server|loop)\b|\b_ErrInfo\b"
)
_ADAPTER = Path(__file__).parents[2] / "adapter"


def test_no_other_module_reaches_aiohttp_internals() -> None:
    """Every use of aiohttp's internals is in `aiohttp_internals.py`, where this file checks
    them; elsewhere the product uses only aiohttp's public interface."""
    users = [
        str(path.relative_to(_ADAPTER))
        for path in sorted(_ADAPTER.rglob("*.py"))
        if path.name != "aiohttp_internals.py"
        and "aiohttp" in (text := path.read_text())
        and _PRIVATE.search(text)
    ]
    assert users == []
