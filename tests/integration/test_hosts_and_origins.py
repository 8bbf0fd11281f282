"""DNS rebinding and cross-origin writes, refused on a real broker: the `Host` allow-list and
the CORS allow-list, with what each lets through."""

from __future__ import annotations

import pytest

from adapter.app import create_app
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready

pytestmark = pytest.mark.integration

APP = "https://app.example"


async def new_stream(client: Client, bucket: str) -> str:
    assert (await client.put(f"/{bucket}")).status == 201
    assert (await client.put(f"/{bucket}/s", headers={"Content-Type": "text/plain"})).status == 201
    return f"/{bucket}/s"


async def tail(client: Client, path: str) -> str:
    return (await client.head(path)).headers["Stream-Next-Offset"]


async def test_a_rebound_host_name_is_refused_before_anything_happens(client: Client) -> None:
    await new_stream(client, "rebind-1")
    before = await tail(client, "/rebind-1/s")
    for host in ("evil.example", "evil.example:4437", "localhost.evil.example", "127.0.0.1.nip.io"):
        response = await client.post("/rebind-1/s", data=b"x", headers={"Host": host})
        assert response.status == 421, host
        assert (await response.json())["error"]["code"] == "host_not_allowed"
        response = await client.delete("/rebind-1", headers={"Host": host})
        assert response.status == 421
    assert await tail(client, "/rebind-1/s") == before
    for host in ("localhost:9", "LOCALHOST.", "127.0.0.1:1", "[::1]:4437"):
        assert (await client.head("/rebind-1/s", headers={"Host": host})).status == 200, host


async def test_allowed_hosts_adds_names_and_star_turns_the_check_off(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory
) -> None:
    named = await aiohttp_client(create_app(make_settings(allowed_hosts="streams.example")))
    await wait_ready(named)
    assert (await named.get("/healthz", headers={"Host": "streams.example:443"})).status == 200
    assert (await named.get("/healthz", headers={"Host": "other.example"})).status == 421
    anything = await aiohttp_client(create_app(make_settings(allowed_hosts="*")))
    await wait_ready(anything)
    assert (await anything.get("/healthz", headers={"Host": "other.example"})).status == 200


async def test_other_origins_are_refused_by_default(client: Client) -> None:
    text = {"Content-Type": "text/plain"}
    await new_stream(client, "origins-1")
    before = await tail(client, "/origins-1/s")
    # A "simple" cross-origin POST: a browser sends it without a preflight.
    response = await client.post("/origins-1/s", data=b"x", headers=text | {"Origin": APP})
    assert response.status == 403
    assert (await response.json())["error"]["code"] == "origin_not_allowed"
    assert "Access-Control-Allow-Origin" not in response.headers
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert await tail(client, "/origins-1/s") == before
    preflight = await client.options("/origins-1/s", headers=_preflight(APP))
    assert preflight.status == 403
    # The page's own origin is the server's: let in.
    own = f"http://{client.host}:{client.port}"
    response = await client.post("/origins-1/s", data=b"x", headers=text | {"Origin": own})
    assert response.status == 204
    assert response.headers["Vary"] == "Origin"


async def test_listed_origins_get_cors_headers_never_credentials(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory
) -> None:
    client = await aiohttp_client(create_app(make_settings(cors_origins=f"{APP},https://b.ex")))
    await wait_ready(client)
    response = await client.get("/healthz", headers={"Origin": APP})
    assert response.headers["Access-Control-Allow-Origin"] == APP
    assert response.headers["Vary"] == "Origin"
    assert "Access-Control-Allow-Credentials" not in response.headers
    exposed = response.headers["Access-Control-Expose-Headers"]
    for header in ("Stream-Next-Offset", "Stream-Cursor", "Producer-Epoch", "Retry-After"):
        assert header in exposed
    assert (await client.get("/healthz", headers={"Origin": "https://c.ex"})).status == 403


async def test_any_origin_is_opt_in_and_answers_star(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory
) -> None:
    client = await aiohttp_client(create_app(make_settings(cors_origins="*")))
    await wait_ready(client)
    response = await client.get("/healthz", headers={"Origin": "https://anyone.example"})
    assert response.headers["Access-Control-Allow-Origin"] == "*"
    assert "Access-Control-Allow-Credentials" not in response.headers
    preflight = await client.options("/x-bucket/s", headers=_preflight("https://a.example"))
    assert preflight.status == 204
    assert preflight.headers["Access-Control-Allow-Origin"] == "*"


async def test_preflights_are_the_same_for_existing_and_absent_resources(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory
) -> None:
    client = await aiohttp_client(create_app(make_settings(cors_origins=APP)))
    await wait_ready(client)
    await new_stream(client, "pre-bucket")
    answers = []
    for path in ("/pre-bucket/s", "/pre-bucket/absent", "/no-bucket/absent", "/v1/stream/x"):
        response = await client.options(path, headers=_preflight(APP))
        answers.append((response.status, sorted(_cors_headers(response.headers).items())))
    assert answers[0][0] == 204
    assert all(answer == answers[0] for answer in answers)


def _preflight(origin: str) -> dict[str, str]:
    return {
        "Origin": origin,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "Content-Type, Producer-Id",
    }


def _cors_headers(headers: object) -> dict[str, str]:
    assert hasattr(headers, "items")
    return {k: v for k, v in headers.items() if k.lower().startswith("access-control")}
