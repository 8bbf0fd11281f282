"""The SSE broadcaster on a real broker: shared events, prompt departures, slow clients dropped."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable

from aiohttp import ClientResponse

from adapter.app import create_app
from adapter.http.keys import FANOUT
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready

TEXT = {"Content-Type": "text/plain"}


async def _stream(client: Client, name: str) -> str:
    path = f"/v1/stream/{name}"
    assert (await client.put(path, headers=TEXT)).status == 201
    return path


async def _until(condition: Callable[[], bool], what: str) -> None:
    for _ in range(400):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never: {what}")


def _after_first_event(body: bytes) -> bytes:
    """Drop the first (per-session) control event; the rest comes from the broadcaster."""
    return body.split(b"\n\n", 1)[1]


async def test_subscribers_at_one_position_get_identical_events(
    client: Client, unique: str
) -> None:
    path = await _stream(client, f"same-{unique}")
    params = {"offset": "now", "live": "sse"}
    responses = [await client.get(path, params=params) for _ in range(30)]
    fanout = client.app[FANOUT]
    await _until(lambda: fanout.tailers == 30, "30 sessions parked")
    assert (await client.post(path, data=b"one", headers=TEXT)).status == 204
    closing = {**TEXT, "Stream-Closed": "true"}
    assert (await client.post(path, data=b"two", headers=closing)).status == 204
    bodies = await asyncio.wait_for(asyncio.gather(*(r.read() for r in responses)), 30)
    tails = {_after_first_event(body) for body in bodies}
    assert len(tails) == 1
    text = tails.pop().decode()
    assert "data:one" in text
    assert "data:two" in text
    assert text.count("event: data") == text.count("event: control") == 2
    assert '"streamClosed":true' in text
    assert fanout.tailers == 0


async def test_a_disconnected_subscriber_leaves_the_broadcaster(
    client: Client, unique: str
) -> None:
    path = await _stream(client, f"gone-{unique}")
    response: ClientResponse = await client.get(path, params={"offset": "now", "live": "sse"})
    fanout = client.app[FANOUT]
    await _until(lambda: fanout.tailers == 1, "the session parked")
    response.close()  # drops the connection without a word
    await _until(lambda: fanout.tailers == 0, "the session left after its client")
    assert client.app[FANOUT].tailers == 0


async def test_a_slow_subscriber_is_dropped_while_others_keep_receiving(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str
) -> None:
    client = await aiohttp_client(create_app(make_settings(sse_write_timeout_ms=500)))
    await wait_ready(client)
    path = await _stream(client, f"slow-{unique}")
    silent = await _silent_subscriber(client, path)
    fast = await client.get(path, params={"offset": "now", "live": "sse"})
    fanout = client.app[FANOUT]
    await _until(lambda: fanout.tailers == 2, "both sessions parked")
    reading = asyncio.create_task(fast.read())
    big = b"x" * 256 * 1024
    for _ in range(48):  # 12 MiB: more than the kernel buffers (4 MiB here) and the backlog
        assert (await client.post(path, data=big, headers=TEXT)).status == 204
    assert (await client.post(path, data=b"end", headers={**TEXT, "Stream-Closed": "true"})).ok
    body = await asyncio.wait_for(reading, 60)
    assert body.count(b"x" * 1024) == 48 * 256  # the reading client got every byte
    assert body.rstrip().endswith(b'"streamClosed":true,"upToDate":true}')
    # Stay silent well past the write timeout: a session still catching up on its own must
    # meet a full backlog and be cut, rather than find a client that has begun to read.
    await asyncio.sleep(10 * 0.5)
    received = await asyncio.wait_for(_read_until_cut(silent), 120)
    # The silent one was cut off, not served to the end.
    assert b"streamClosed" not in received, f"served to the end ({len(received)} bytes)"
    assert received.count(b"x" * 1024) < 48 * 256
    silent.close()
    await _until(lambda: fanout.tailers == 0, "nobody left")


async def _silent_subscriber(client: Client, path: str) -> socket.socket:
    """A raw connection that asks for SSE and then reads nothing (tiny receive buffer)."""
    loop = asyncio.get_running_loop()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    host, port = str(client.server.host), int(client.server.port or 0)
    await loop.sock_connect(sock, (host, port))
    request = f"GET {path}?offset=now&live=sse HTTP/1.1\r\nHost: {host}\r\n\r\n"
    await loop.sock_sendall(sock, request.encode())
    return sock


async def _read_until_cut(sock: socket.socket, quiet_s: float = 5) -> bytes:
    """What the client still gets: until the connection ends, or nothing comes for `quiet_s`.

    A cut connection may still deliver what the kernel had buffered before it ends; a quiet
    spell stops the read as well, so what the server did is judged by the bytes, not by how
    soon the socket reports its end.
    """
    loop = asyncio.get_running_loop()
    chunks = []
    with contextlib.suppress(ConnectionResetError, TimeoutError):
        while chunk := await asyncio.wait_for(loop.sock_recv(sock, 2**20), quiet_s):
            chunks.append(chunk)
    return b"".join(chunks)


async def test_the_sweep_sends_heartbeats_and_ends_responses_at_their_maximum_duration(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str
) -> None:
    settings = make_settings(sse_heartbeat_ms=200, sse_max_duration_ms=2500)
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    path = await _stream(client, f"idle-{unique}")
    response = await client.get(path, params={"offset": "now", "live": "sse"})
    body = await asyncio.wait_for(response.read(), 30)  # ends without any append
    assert body.startswith(b"event: control\n")
    assert b": keep-alive\n\n" in body
    assert b"streamClosed" not in body
    assert client.app[FANOUT].tailers == 0
