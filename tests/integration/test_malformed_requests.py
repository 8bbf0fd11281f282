"""Requests refused below the routes or before their body is read: each a JSON 4xx with the
protocol's headers, never a 500, never an ERROR traceback."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
import pytest_asyncio
from aiohttp import ClientSession

from tests.served import RawResponse, Served, ServedApp, exchange, read_response

BUCKET = "malformed"
HOST = b"Host: localhost\r\n"


pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(served_adapter: ServedApp) -> Served:
    where = served_adapter.where
    async with ClientSession() as session:
        async with session.put(f"{where.url}/{BUCKET}") as response:
            assert response.status == 201
        async with session.put(f"{where.url}/{BUCKET}/s") as response:
            assert response.status == 201
    return where


@pytest.fixture(autouse=True)
def no_errors_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)


def _assert_refused(response: RawResponse, status: int, code: str) -> None:
    assert response.status == status
    assert response.headers["content-type"] == "application/json"
    assert response.headers["x-content-type-options"] == "nosniff"
    # The CORS policy was applied (same-origin only by default: these raw requests, most
    # refused before their headers were read, name no allowed Origin).
    assert response.headers["vary"] == "Origin"
    assert json.loads(response.body)["error"]["code"] == code


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize(
    ("request_bytes", "status", "code"),
    [
        (b"GET /a\x00b HTTP/1.1\r\n" + HOST + b"\r\n", 400, "bad_request"),
        (
            b"GET /healthz HTTP/1.1\r\n" + HOST + b"X-Big: " + b"a" * 9000 + b"\r\n\r\n",
            431,
            "headers_too_large",
        ),
        (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n" + HOST + b"\r\n", 414, "uri_too_long"),
        (b"GET /healthz HTTP/1.1\r\nX-A: b\rc\r\n" + HOST + b"\r\n", 400, "bad_request"),
        (
            b"POST /malformed/s HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n"
            b"Content-Type: application/octet-stream\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
            400,
            "bad_request",
        ),
        (
            b"GET /healthz HTTP/1.1\r\n"
            + HOST
            + b"".join(b"X-%d: 1\r\n" % i for i in range(200))
            + b"\r\n",
            431,
            "headers_too_large",
        ),
    ],
    ids=[
        "nul-in-path",
        "header-too-long",
        "request-line-too-long",
        "bare-cr",
        "bad-chunk-size",
        "too-many-headers",
    ],
)
async def test_parser_refusals_are_json(
    server: Served, caplog: pytest.LogCaptureFixture, request_bytes: bytes, status: int, code: str
) -> None:
    response = await exchange(server, request_bytes)
    _assert_refused(response, status, code)
    assert b"aaaa" not in response.body  # the input is not echoed
    assert _errors(caplog) == []


async def test_a_bad_chunk_after_the_headers_is_400(
    server: Served, caplog: pytest.LogCaptureFixture
) -> None:
    reader, writer = await asyncio.open_connection(server.host, server.port)
    head = b"POST /malformed/s HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n"
    writer.write(head + b"Content-Type: application/octet-stream\r\n\r\n3\r\nabc\r\n")
    await writer.drain()
    await asyncio.sleep(0.2)  # the handler is reading the body when the bad chunk arrives
    writer.write(b"zz\r\nabc\r\n0\r\n\r\n")
    response = await asyncio.wait_for(read_response(reader), 10)
    writer.close()
    _assert_refused(response, 400, "bad_request")
    assert _errors(caplog) == []
    assert await _stream_body(server) == b""


async def test_a_client_hanging_up_mid_body_is_no_error(
    server: Served, caplog: pytest.LogCaptureFixture
) -> None:
    _, writer = await asyncio.open_connection(server.host, server.port)
    head = b"POST /malformed/s HTTP/1.1\r\n" + HOST + b"Content-Length: 1000\r\n"
    writer.write(head + b"Content-Type: application/octet-stream\r\n\r\n" + b"x" * 10)
    await writer.drain()
    await asyncio.sleep(0.2)
    writer.close()
    for _ in range(100):
        if any("client hung up" in r.getMessage() for r in caplog.records):
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the server never saw the hang-up")
    assert _errors(caplog) == []
    assert await _stream_body(server) == b""


@pytest.mark.parametrize(
    ("header", "value"),
    [(b"Producer-Id", b"\xff\xfe"), (b"Content-Type", b"application/octet-stream; x=\xff\xfe")],
)
async def test_non_utf8_header_text_is_400(server: Served, header: bytes, value: bytes) -> None:
    producer = b"Producer-Id: p\r\nProducer-Epoch: 0\r\nProducer-Seq: 0\r\n"
    if header == b"Producer-Id":
        producer = b"Producer-Id: " + value + b"\r\nProducer-Epoch: 0\r\nProducer-Seq: 0\r\n"
        content_type = b"application/octet-stream"
    else:
        content_type = value
    response = await exchange(
        server,
        b"POST /malformed/s HTTP/1.1\r\n"
        + HOST
        + producer
        + b"Content-Type: "
        + content_type
        + b"\r\nContent-Length: 1\r\nConnection: close\r\n\r\na",
    )
    _assert_refused(response, 400, "invalid_header")
    assert await _stream_body(server) == b""


@pytest.mark.parametrize("escaped", ["%ff%fe", "%ed%a0%80", "ok%c3"])
async def test_a_path_that_is_not_utf8_is_400(server: Served, escaped: str) -> None:
    for path in (f"/{BUCKET}/{escaped}", f"/v1/stream/{BUCKET}/{escaped}"):
        response = await exchange(
            server,
            f"PUT {path} HTTP/1.1\r\n".encode()
            + HOST
            + b"Content-Length: 0\r\nConnection: close\r\n\r\n",
        )
        _assert_refused(response, 400, "bad_request")
    async with ClientSession() as session, session.get(f"{server.url}/{BUCKET}/streams") as listing:
        assert [s["stream_id"] for s in (await listing.json())["streams"]] == ["s"]


async def test_the_flat_surface_cannot_create_the_bucket_listing(server: Served) -> None:
    async with ClientSession() as session:
        async with session.put(f"{server.url}/v1/stream/{BUCKET}/streams") as response:
            assert response.status == 400
            assert (await response.json())["error"]["code"] == "invalid_stream_id"
        async with session.get(f"{server.url}/{BUCKET}/streams") as listing:
            assert [s["stream_id"] for s in (await listing.json())["streams"]] == ["s"]


async def test_expect_continue_with_an_oversized_body_is_413_at_once(server: Served) -> None:
    request = (
        b"POST /malformed/s HTTP/1.1\r\n" + HOST + b"Content-Type: application/octet-stream\r\n"
        b"Expect: 100-continue\r\nContent-Length: 99999999\r\n\r\n"
    )
    response = await exchange(server, request)  # no body sent: the answer must not wait for it
    _assert_refused(response, 413, "payload_too_large")


async def test_expect_continue_is_answered_once_the_checks_pass(server: Served) -> None:
    reader, writer = await asyncio.open_connection(server.host, server.port)
    writer.write(
        b"POST /malformed/s HTTP/1.1\r\n" + HOST + b"Content-Type: application/octet-stream\r\n"
        b"Expect: 100-continue\r\nContent-Length: 3\r\nConnection: close\r\n\r\n"
    )
    await writer.drain()
    interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
    writer.write(b"abc")
    response = await asyncio.wait_for(read_response(reader), 10)
    writer.close()
    assert response.status == 204
    assert await _stream_body(server) == b"abc"


async def test_an_unknown_expectation_is_417(server: Served) -> None:
    request = b"GET /healthz HTTP/1.1\r\n" + HOST + b"Expect: teapot\r\nConnection: close\r\n\r\n"
    _assert_refused(await exchange(server, request), 417, "expectation_failed")


async def _stream_body(server: Served) -> bytes:
    url, query = f"{server.url}/{BUCKET}/s", {"offset": "-1"}
    async with ClientSession() as session, session.get(url, params=query) as response:
        assert response.status == 200
        return await response.read()
