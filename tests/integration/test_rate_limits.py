"""Rate limits and the live-reader cap on a real broker, by counting statuses (never timing):
only 2xx and 429 are seen, and every 429 carries `Retry-After` and a JSON error."""

from __future__ import annotations

import asyncio
import gzip
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from adapter.app import create_app
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready
from tests.tokens import token_file

pytestmark = pytest.mark.integration

TEXT = {"Content-Type": "text/plain"}


async def limited(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, **limits: int
) -> Client:
    client = await aiohttp_client(create_app(make_settings(**limits)))
    await wait_ready(client)
    for bucket in ("limited-a", "limited-b"):
        assert (await client.put(f"/{bucket}")).status == 201
        assert (await client.put(f"/{bucket}/s", headers=TEXT, data=b"x")).status == 201
    return client


async def assert_429(client: Client, method: str, path: str, code: str, **kwargs: object) -> None:
    response = await client.request(method, path, **kwargs)  # type: ignore[arg-type]
    assert response.status == 429
    assert int(response.headers["Retry-After"]) >= 1
    assert (await response.json())["error"]["code"] == code


async def test_requests_over_the_rate_get_429_per_bucket(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory
) -> None:
    client = await limited(aiohttp_client, make_settings, rate_limit_requests=1, rate_limit_burst=5)
    statuses = []
    for _ in range(12):
        response = await client.head("/limited-a/s")
        statuses.append(response.status)
        if response.status == 429:
            assert int(response.headers["Retry-After"]) >= 1
    assert set(statuses) <= {200, 429}
    assert statuses[:3] == [200, 200, 200]  # the burst (5, less the 2 set-up requests)
    assert 429 in statuses
    assert statuses.count(200) < 12
    # Another bucket has its own budget; health checks have none.
    assert (await client.head("/limited-b/s")).status == 200
    assert all([(await client.get("/healthz")).status == 200 for _ in range(10)])


async def test_appended_bytes_over_the_rate_get_429(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory
) -> None:
    client = await limited(aiohttp_client, make_settings, rate_limit_append_bytes=10)
    tail = (await client.head("/limited-a/s")).headers["Stream-Next-Offset"]
    # One body over the burst passes; it leaves ~59 s of debt, so the next is refused unread.
    assert (await client.post("/limited-a/s", headers=TEXT, data=b"y" * 600)).status == 204
    after = (await client.head("/limited-a/s")).headers["Stream-Next-Offset"]
    await assert_429(client, "POST", "/limited-a/s", "rate_limited", headers=TEXT, data=b"z")
    assert (await client.head("/limited-a/s")).headers["Stream-Next-Offset"] == after != tail
    assert (await client.post("/limited-b/s", headers=TEXT, data=b"z")).status == 204
    # Reads are not appends.
    assert (await client.get("/limited-a/s?offset=-1")).status == 200


async def test_live_readers_are_capped_per_bucket(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory
) -> None:
    client = await limited(aiohttp_client, make_settings, max_live_readers_per_bucket=2)
    sse = "/limited-a/s?offset=-1&live=sse"
    async with AsyncExitStack() as stack:
        for _ in range(2):
            response = await stack.enter_async_context(client.get(sse))
            assert response.status == 200
        await assert_429(client, "GET", sse, "too_many_readers")
        poll = "/limited-a/s?offset=now&live=long-poll&timeout=1"
        await assert_429(client, "GET", poll, "too_many_readers")
        assert (await client.get("/limited-a/s?offset=-1")).status == 200  # not live
        async with client.get("/limited-b/s?offset=-1&live=sse") as other:
            assert other.status == 200
    # The readers left: a new one is let in once the server has noticed.
    for _ in range(100):
        async with client.get(sse) as response:
            if response.status == 200:
                break
            assert response.status == 429
        await asyncio.sleep(0.1)
    else:
        raise AssertionError("the cap never freed up after its readers left")


async def test_limits_are_per_principal(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, tmp_path: Path
) -> None:
    tokens = {
        "alice": ("alice-secret-token-0123456789", ["read:*", "admin:*"]),
        "bob": ("bob-secret-token-0123456789", ["read:*"]),
    }
    settings = make_settings(
        auth_mode="static",
        auth_token_file=str(token_file(tmp_path / "t.toml", tokens)),
        rate_limit_requests=1,
        rate_limit_burst=2,
    )
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    alice = {"Authorization": f"Bearer {tokens['alice'][0]}"}
    bob = {"Authorization": f"Bearer {tokens['bob'][0]}"}
    assert (await client.put("/limited-c", headers=alice)).status == 201
    statuses = [(await client.get("/limited-c", headers=alice)).status for _ in range(6)]
    assert 429 in statuses
    assert (await client.get("/limited-c", headers=bob)).status == 200


async def test_a_coded_append_is_charged_its_decoded_bytes(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory
) -> None:
    client = await limited(aiohttp_client, make_settings, rate_limit_append_bytes=10)
    coded = gzip.compress(b"y" * 600)  # ~30 bytes sent, 600 stored
    headers = {**TEXT, "Content-Encoding": "gzip"}
    assert (await client.post("/limited-a/s", headers=headers, data=coded)).status == 204
    refused = await client.post("/limited-a/s", headers=TEXT, data=b"z")
    assert refused.status == 429
    # ~59 s of debt at 10 bytes/s: the 600 bytes stored, not the ~30 sent (~2 s).
    assert int(refused.headers["Retry-After"]) > 30
