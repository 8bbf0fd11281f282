"""The Host allow-list: which names pass by default, and how a Host header is read."""

from __future__ import annotations

import socket

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from adapter.config import Settings
from adapter.http.hosts import REMEMBERED_HOSTS, allowed_hosts, host_middleware, host_name
from adapter.protocol.errors import ErrorCode, ProtocolError


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("localhost", "localhost"),
        ("LocalHost:4437", "localhost"),
        ("example.com.", "example.com"),
        ("[::1]:4437", "::1"),
        ("[::1]", "::1"),
        ("127.0.0.1:80", "127.0.0.1"),
        ("::1", "::1"),
    ],
)
def test_host_name(header: str, name: str) -> None:
    assert host_name(header) == name


def test_defaults_on_loopback() -> None:
    assert allowed_hosts(Settings()) == frozenset({"localhost", "127.0.0.1", "::1"})


def test_a_named_listener_and_the_advertised_host_are_allowed() -> None:
    settings = Settings(listen="10.0.0.5:4437", advertise_url="http://adapter-1.internal:4437")
    hosts = allowed_hosts(settings)
    assert hosts is not None
    assert {"10.0.0.5", "adapter-1.internal", "localhost"} <= hosts
    assert "evil.example" not in hosts


def test_a_wildcard_listener_allows_the_machines_name() -> None:
    hosts = allowed_hosts(Settings(listen="0.0.0.0:4437"))
    assert hosts is not None
    assert socket.gethostname().lower() in hosts
    assert "0.0.0.0" not in hosts


def test_configured_names_add_and_star_allows_all() -> None:
    hosts = allowed_hosts(Settings(allowed_hosts="Streams.Example, other.example:443"))
    assert hosts is not None
    assert {"streams.example", "other.example"} <= hosts
    assert allowed_hosts(Settings(allowed_hosts="*")) is None


async def test_each_host_keeps_its_verdict_when_remembered_and_past_the_memory() -> None:
    check = host_middleware(frozenset({"localhost"}))

    async def handler(_request: web.Request) -> web.StreamResponse:
        return web.Response(status=204)

    # Past the hosts remembered, the others are still judged, each on its own name.
    for index in range(REMEMBERED_HOSTS + 10):
        for _ in range(2):
            refused = make_mocked_request("GET", "/", headers={"Host": f"h{index}.example"})
            with pytest.raises(ProtocolError) as raised:
                await check(refused, handler)
            assert raised.value.code is ErrorCode.HOST_NOT_ALLOWED
            allowed = make_mocked_request("GET", "/", headers={"Host": f"LOCALHOST:{index}"})
            assert (await check(allowed, handler)).status == 204
