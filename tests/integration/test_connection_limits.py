"""Slow and numerous connections (slowloris): a head, a body or an idle
keep-alive later than its timeout is answered 408 or closed; connections over the
per-address limit are answered 503 while other clients are still served."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from adapter.app import create_app
from adapter.config import Settings
from tests.served import READ_TIMEOUT_S, RawResponse, Served, read_response, served

BUCKET = "slow"
HOST = b"Host: localhost\r\n"
PER_ADDRESS = 4
POST = b"POST /slow/s HTTP/1.1\r\n" + HOST + b"Content-Type: application/octet-stream\r\n"
HEALTHZ = b"GET /healthz HTTP/1.1\r\n" + HOST + b"\r\n"

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Served]:
    settings = Settings(
        bootstrap_servers=kafka_bootstrap,
        topic_prefix=f"c{uuid.uuid4().hex[:10]}.",
        partitions=1,
        cold_dir=str(tmp_path_factory.mktemp("cold")),
        kafka_timeout_ms=5_000,
        header_timeout_ms=300,
        body_timeout_ms=300,
        keepalive_timeout_ms=3_000,
        max_connections_per_address=PER_ADDRESS,
    )
    async with served(create_app(settings)) as where:
        for request in (b"PUT /slow", b"PUT /slow/s"):
            head = request + b" HTTP/1.1\r\n" + HOST + b"Content-Length: 0\r\n\r\n"
            async with _connection(where) as (reader, writer):
                assert (await _ask(reader, writer, head)).status == 201
        yield where


@contextlib.asynccontextmanager
async def _connection(
    where: Served, source: str = "127.0.0.1"
) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    reader, writer = await asyncio.open_connection(where.host, where.port, local_addr=(source, 0))
    try:
        yield reader, writer
    finally:
        writer.close()


async def _ask(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
) -> RawResponse:
    writer.write(request)
    await writer.drain()
    return await asyncio.wait_for(read_response(reader), READ_TIMEOUT_S)


async def _closed(reader: asyncio.StreamReader) -> bool:
    """Whether the server closed the connection (bounded wait: never timing, only an end)."""
    try:
        return await asyncio.wait_for(reader.read(), READ_TIMEOUT_S) == b""
    except ConnectionResetError:
        return True


def _assert_error(response: RawResponse, status: int, code: str) -> None:
    assert response.status == status
    assert response.headers["content-type"] == "application/json"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert json.loads(response.body)["error"]["code"] == code


async def test_a_partial_request_line_is_408_and_closed(server: Served) -> None:
    async with _connection(server) as (reader, writer):
        writer.write(b"GET /heal")
        response = await asyncio.wait_for(read_response(reader), READ_TIMEOUT_S)
        _assert_error(response, 408, "request_timeout")
        assert await _closed(reader)


async def test_a_body_shorter_than_its_length_is_408_and_closed(server: Served) -> None:
    async with _connection(server) as (reader, writer):
        writer.write(POST + b"Content-Length: 100\r\n\r\n" + b"x" * 10)
        response = await asyncio.wait_for(read_response(reader), READ_TIMEOUT_S)
        _assert_error(response, 408, "request_timeout")
        assert await _closed(reader)


async def test_an_endless_chunked_body_is_closed(server: Served) -> None:
    async with _connection(server) as (reader, writer):
        writer.write(POST + b"Transfer-Encoding: chunked\r\n\r\n")

        async def dribble() -> None:
            with contextlib.suppress(ConnectionError):
                while True:
                    writer.write(b"1\r\nx\r\n")
                    await writer.drain()
                    await asyncio.sleep(0.05)

        sending = asyncio.create_task(dribble())
        try:
            with contextlib.suppress(ConnectionResetError, asyncio.IncompleteReadError):
                response = await asyncio.wait_for(read_response(reader), READ_TIMEOUT_S)
                _assert_error(response, 408, "request_timeout")  # unless the close beat it
            assert await _closed(reader)
        finally:
            sending.cancel()
    async with _connection(server) as (reader, writer):
        read = await _ask(reader, writer, b"GET /slow/s?offset=-1 HTTP/1.1\r\n" + HOST + b"\r\n")
        assert read.status == 200
        assert read.body == b""  # nothing of the endless body was appended


async def test_an_idle_keepalive_connection_is_closed(server: Served) -> None:
    async with _connection(server) as (reader, writer):
        assert (await _ask(reader, writer, HEALTHZ)).status == 200
        assert await _closed(reader)


async def test_connections_over_the_per_address_limit_are_503(server: Served) -> None:
    async with contextlib.AsyncExitStack() as held:
        for _ in range(PER_ADDRESS):
            await _admitted(server, held)
        async with _connection(server) as (reader, writer):
            refused = await _ask(reader, writer, HEALTHZ)
            _assert_error(refused, 503, "too_many_connections")
            assert refused.headers["retry-after"]
            assert await _closed(reader)
        async with _connection(server, source="127.0.0.2") as (reader, writer):
            assert (await _ask(reader, writer, HEALTHZ)).status == 200  # others are served
    async with contextlib.AsyncExitStack() as held:  # the held ones closed: places are back
        await _admitted(server, held)


async def _admitted(server: Served, held: contextlib.AsyncExitStack) -> None:
    """A connection held open in `held`, once one is admitted (a closed connection's place
    comes back when the server sees it closed, a moment after the client closed it)."""
    for _ in range(100):
        reader, writer = await held.enter_async_context(_connection(server))
        if (await _ask(reader, writer, HEALTHZ)).status == 200:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("no connection was admitted")
