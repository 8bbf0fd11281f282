"""A shared cache (nginx with `proxy_cache`, keyed by URL) in front of an adapter with auth on:
one tenant's reads are never served to another from it, while reads of a public-read bucket
are still cached for everyone."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from adapter.app import create_app
from tests.cache_proxy import caching_proxy
from tests.conftest import ClientFactory, SettingsFactory, wait_ready
from tests.tokens import token_file

A_TOKEN = "tenant-a-token-0123456789"
B_TOKEN = "tenant-b-token-0123456789"
TEXT = {"Content-Type": "text/plain"}


def _as(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _read(
    session: aiohttp.ClientSession, url: str, token: str
) -> tuple[int, bytes, dict[str, str]]:
    async with session.get(url, params={"offset": "-1"}, headers=_as(token)) as reply:
        return reply.status, await reply.read(), dict(reply.headers)


async def test_a_shared_cache_never_serves_one_tenant_s_read_to_another(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, tmp_path: Path, unique: str
) -> None:
    mine, public = f"tenant-a-{unique}", f"pub-{unique}"
    tokens = token_file(
        tmp_path / "tokens.toml",
        {
            "a": (A_TOKEN, ["admin:*", "append:*", "read:tenant-a-*"]),
            "b": (B_TOKEN, ["read:tenant-b-*"]),
        },
    )
    settings = make_settings(
        auth_mode="static", auth_token_file=str(tokens), auth_public_read="pub-*"
    )
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    for bucket in (mine, public):
        assert (await client.put(f"/{bucket}", headers=_as(A_TOKEN))).status == 201
        made = await client.put(f"/{bucket}/s", headers=_as(A_TOKEN) | TEXT)
        assert made.status == 201
        sent = await client.post(f"/{bucket}/s", headers=_as(A_TOKEN) | TEXT, data=b"A's secret")
        assert sent.status == 204
    assert client.server.port is not None
    with caching_proxy(client.server.port, tmp_path / "nginx") as proxy:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
            first = await _read(session, f"{proxy}/{mine}/s", A_TOKEN)
            again = await _read(session, f"{proxy}/{mine}/s", A_TOKEN)
            other = await _read(session, f"{proxy}/{mine}/s", B_TOKEN)
            await _read(session, f"{proxy}/{public}/s", A_TOKEN)
            shared = await _read(session, f"{proxy}/{public}/s", B_TOKEN)
    assert (first[0], first[1]) == (200, b"A's secret")
    assert (other[0], other[2]["X-Cache"]) == (403, "MISS"), other[1]  # never A's bytes
    assert first[2]["Cache-Control"].startswith("private, ")
    assert "Authorization" in first[2]["Vary"]
    assert (again[0], again[1], again[2]["X-Cache"]) == (200, b"A's secret", "MISS")
    assert (shared[0], shared[1], shared[2]["X-Cache"]) == (200, b"A's secret", "HIT")
    assert shared[2]["Cache-Control"].startswith("public, ")
