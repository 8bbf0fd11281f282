"""The listener accepts the waiting connections a bounded share per turn of the loop, many
more than uvloop's one, and serves them."""

from __future__ import annotations

import asyncio
import socket

import aiohttp
import pytest
from aiohttp import web

from adapter.http.accepting import AcceptingSite, Acceptor


async def _hello(_: web.Request) -> web.Response:
    return web.Response(text="hello")


async def _runner() -> web.AppRunner:
    app = web.Application()
    app.router.add_get("/", _hello)
    runner = web.AppRunner(app)
    await runner.setup()
    return runner


async def test_one_turn_accepts_every_connection_waiting() -> None:
    """50 clients connected before the loop looks: one readiness call takes them all (uvloop
    itself takes one a turn, so a busy loop left a burst waiting in the kernel for seconds)."""
    runner = await _runner()
    listener = socket.create_server(("127.0.0.1", 0), backlog=128)
    port = listener.getsockname()[1]
    clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(50)]
    assert runner.server is not None
    acceptor = Acceptor([listener], runner.server, None, None)
    try:
        acceptor.loop.remove_reader(listener.fileno())  # only the call below accepts
        acceptor._readable(listener)
        assert len(acceptor.connecting) == 50
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing left waiting
        await asyncio.gather(*acceptor.connecting)
    finally:
        acceptor.close()
        for client in clients:
            client.close()
        await runner.cleanup()


async def test_a_burst_larger_than_a_turn_is_accepted_over_several_turns() -> None:
    """200 clients connected at once: one readiness call takes only a turn's share, so the
    connections already open are served between the turns (3,000 set up in one turn held the
    loop for a quarter of a second); the rest are taken on the next turns."""
    runner = await _runner()
    listener = socket.create_server(("127.0.0.1", 0), backlog=512)
    port = listener.getsockname()[1]
    clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(200)]
    assert runner.server is not None
    acceptor = Acceptor([listener], runner.server, None, None)
    try:
        acceptor.loop.remove_reader(listener.fileno())
        acceptor._readable(listener)
        assert 0 < len(acceptor.connecting) < 200
        acceptor.loop.add_reader(listener.fileno(), acceptor._readable, listener)
        for _ in range(1000):  # turns of the loop, a bounded wait (an end, not a timing)
            if len(runner.server.connections) == 200:
                break
            await asyncio.sleep(0.01)
        assert len(runner.server.connections) == 200
    finally:
        acceptor.close()
        for client in clients:
            client.close()
        await runner.cleanup()


async def test_a_site_serves_requests_on_an_address_and_on_a_given_socket() -> None:
    runner = await _runner()
    given = socket.create_server(("127.0.0.1", 0))
    sites = [
        AcceptingSite(runner, address=("127.0.0.1", 0), backlog=1024),
        AcceptingSite(runner, sock=given),
    ]
    try:
        for site in sites:
            await site.start()
        ports = [address[1] for address in runner.addresses]
        assert len(ports) == 2
        assert ports[1] == given.getsockname()[1]
        async with aiohttp.ClientSession() as session:

            async def get(port: int) -> str:
                async with session.get(f"http://127.0.0.1:{port}/") as response:
                    return await response.text()

            answers = await asyncio.gather(*(get(port) for port in ports for _ in range(100)))
        assert answers == ["hello"] * 200
        assert sites[0].name.startswith("http://127.0.0.1:")
    finally:
        await runner.cleanup()
    assert runner.addresses == []


async def test_an_address_in_use_is_an_error_and_leaves_no_socket() -> None:
    runner = await _runner()
    taken = socket.create_server(("127.0.0.1", 0))
    try:
        site = AcceptingSite(runner, address=("127.0.0.1", taken.getsockname()[1]))
        with pytest.raises(OSError, match="in use"):
            await site.start()
    finally:
        taken.close()
        await runner.cleanup()
