"""A JWKS fetched from the identity provider's URL: tokens pass once the keys arrive, and
are refused (401) while they cannot be fetched."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from adapter.app import create_app
from devstack.process import free_port
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready
from tests.tokens import AUDIENCE, ISSUER, Signer

pytestmark = pytest.mark.integration

SIGNER = Signer()


class Provider:
    """An identity provider's JWKS endpoint: the signers it publishes now, and how many times
    it was asked."""

    def __init__(self, *signers: Signer) -> None:
        self.signers = list(signers)
        self.fetches = 0
        self.url = ""

    async def keys(self, _: web.Request) -> web.Response:
        self.fetches += 1
        keys = [json.loads(signer.jwks())["keys"][0] for signer in self.signers]
        return web.json_response({"keys": keys}, headers={"Cache-Control": "max-age=3600"})


@pytest.fixture
async def provider() -> AsyncIterator[Provider]:
    provider = Provider(SIGNER)
    app = web.Application()
    app.router.add_get("/.well-known/jwks.json", provider.keys)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    provider.url = f"http://127.0.0.1:{port}/.well-known/jwks.json"
    try:
        yield provider
    finally:
        await runner.cleanup()


@pytest.fixture
def jwks_url(provider: Provider) -> str:
    return provider.url


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


async def _until_let_in(client: Client, signer: Signer) -> None:
    headers = {"Authorization": f"Bearer {signer.token(['read:*'])}"}
    for _ in range(100):  # the first fetch runs beside start-up
        if (await client.get("/some-bucket", headers=headers)).status != 401:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the provider's first key set never arrived")


async def test_a_rotated_key_is_fetched_on_its_first_token_and_the_removed_one_refused(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, provider: Provider
) -> None:
    client = await adapter(aiohttp_client, make_settings, provider.url)
    await _until_let_in(client, SIGNER)
    rotated = Signer(kid="rotated-key")
    provider.signers = [rotated]  # the provider rotates: the old key is gone, max-age 1 h
    new = {"Authorization": f"Bearer {rotated.token(['read:*'])}"}
    assert (await client.get("/some-bucket", headers=new)).status == 404  # let in at once
    old = {"Authorization": f"Bearer {SIGNER.token(['read:*'])}"}
    response = await client.get("/some-bucket", headers=old)
    assert response.status == 401
    assert "kid" in (await response.json())["error"]["message"]


async def test_unknown_kids_fetch_the_key_set_at_most_once_in_a_while(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, provider: Provider
) -> None:
    client = await adapter(aiohttp_client, make_settings, provider.url)
    await _until_let_in(client, SIGNER)
    before = provider.fetches
    forged = [Signer(kid=f"forged-{n}") for n in range(20)]
    statuses = await asyncio.gather(
        *(
            client.get("/some-bucket", headers={"Authorization": f"Bearer {f.token(['read:*'])}"})
            for f in forged
        )
    )
    assert {response.status for response in statuses} == {401}
    assert provider.fetches - before <= 1


async def test_without_keys_every_token_is_refused(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory
) -> None:
    client = await adapter(aiohttp_client, make_settings, f"http://127.0.0.1:{free_port()}/k")
    headers = {"Authorization": f"Bearer {SIGNER.token(['read:*'])}"}
    response = await client.get("/some-bucket", headers=headers)
    assert response.status == 401
    assert "not loaded" in (await response.json())["error"]["message"]
