"""Errors render as `{"error": {"code", "message"}}` with their status and headers."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest
from aiohttp import web

from adapter.http.observe import echo_request_id
from adapter.http.render import Handler, error_response, errors_middleware
from adapter.log.errors import LogUnavailable
from adapter.protocol.errors import ErrorCode, ProtocolError


def _body(text: bytes) -> object:
    return json.loads(text)


def test_error_body_and_status() -> None:
    response = error_response(ProtocolError(ErrorCode.NOT_FOUND, "no such stream"))
    assert response.status == 404
    assert response.content_type == "application/json"
    assert isinstance(response.body, bytes)
    assert _body(response.body) == {"error": {"code": "not_found", "message": "no such stream"}}
    assert "Retry-After" not in response.headers


def test_unavailable_errors_say_when_to_retry() -> None:
    response = error_response(ProtocolError(ErrorCode.UNAVAILABLE, "kafka down"))
    assert response.status == 503
    assert response.headers["Retry-After"] == "1"


def test_extra_fields_sit_beside_the_error() -> None:
    error = ProtocolError(ErrorCode.NOT_READY, "waiting for: kafka")
    response = error_response(error, {"Cache-Control": "no-store"}, ready=False)
    assert isinstance(response.body, bytes)
    body = {"error": {"code": "not_ready", "message": "waiting for: kafka"}, "ready": False}
    assert _body(response.body) == body
    assert response.headers["Cache-Control"] == "no-store"
    assert response.headers["Retry-After"] == "1"


async def _raw_exchange(handler: Handler, keep_alive: bool = True) -> bytes:
    """Everything a server with the errors middleware sends to one GET, until it closes the
    connection (a server that keeps it open fails the wait)."""
    head = b"GET / HTTP/1.1\r\nHost: test\r\n" + (b"" if keep_alive else b"Connection: close\r\n")
    app = web.Application(middlewares=[errors_middleware])
    app.on_response_prepare.append(echo_request_id)
    app.router.add_get("/", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    await web.SockSite(runner, listener).start()
    try:
        reader, writer = await asyncio.open_connection(*listener.getsockname()[:2])
        writer.write(head + b"\r\n")
        try:
            return await asyncio.wait_for(reader.read(-1), 10)
        finally:
            writer.close()
            await writer.wait_closed()
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("failure", [LogUnavailable("kafka went away"), RuntimeError("a bug")])
async def test_a_failure_after_the_response_began_breaks_the_connection_off(
    failure: Exception,
) -> None:
    """Once a streamed response's head and first event are out, no second response may follow
    (it would land inside the first's chunked body): the connection is dropped mid-body."""

    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.content_type = "text/event-stream"
        await response.prepare(request)
        await response.write(b"event: control\ndata: {}\n\n")
        raise failure

    received = await _raw_exchange(handler)
    assert received.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"event: control\ndata: {}\n\n" in received
    assert received.count(b"HTTP/1.1 ") == 1
    assert not received.endswith(b"0\r\n\r\n")  # cut short: never a body that looks complete


async def test_a_failure_before_the_response_began_is_answered() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        raise LogUnavailable("kafka went away")

    received = await _raw_exchange(handler, keep_alive=False)
    assert received.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
    assert b'"code":"unavailable"' in received
