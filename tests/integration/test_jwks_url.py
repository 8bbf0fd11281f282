"""A JWKS fetched from the identity provider's URL: tokens pass once the keys arrive, and
are refused (401) while they cannot be fetched."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from adapter.app import create_app
from devstack.process import free_port
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready
from tests.tokens import AUDIENCE, ISSUER, Signer

pytestmark = pytest.mark.integration

SIGNER = Signer()


@pytest.fixture
async def jwks_url() -> AsyncIterator[str]:
    async def keys(_: web.Request) -> web.Response:
        return web.Response(text=SIGNER.jwks(), content_type="application/json")

    app = web.Application()
    app.router.add_get("/.well-known/jwks.json", keys)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}/.well-known/jwks.json"
    finally:
        await runner.cleanup()


async def adapter(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, url: str
) -> Client:
    settings = make_settings(
        auth_mode="jwt",
        auth_jwt_issuer=ISSUER,
        auth_jwt_audience=AUDIENCE,
        auth_jwt_jwks_url=url,
    )
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    return client


async def test_keys_from_the_url_verify_tokens(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, jwks_url: str
) -> None:
    client = await adapter(aiohttp_client, make_settings, jwks_url)
    headers = {"Authorization": f"Bearer {SIGNER.token(['read:*'])}"}
    for _ in range(100):  # the first fetch runs beside start-up
        status = (await client.get("/some-bucket", headers=headers)).status
        if status != 401:
            break
        await asyncio.sleep(0.05)
    assert status == 404  # let in: the bucket does not exist


async def test_without_keys_every_token_is_refused(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory
) -> None:
    client = await adapter(aiohttp_client, make_settings, f"http://127.0.0.1:{free_port()}/k")
    headers = {"Authorization": f"Bearer {SIGNER.token(['read:*'])}"}
    response = await client.get("/some-bucket", headers=headers)
    assert response.status == 401
    assert "not loaded" in (await response.json())["error"]["message"]
