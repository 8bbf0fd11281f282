"""`/healthz` and `/readyz` of the app against a real broker, a dead one and a bad topic."""

from __future__ import annotations

import asyncio
from typing import Any

from adapter.app import ADMIN, FATAL, create_app
from adapter.config import Settings
from tests.conftest import Client, ClientFactory, SettingsFactory
from topology.errors import TopologyMismatch
from topology.naming import InternalTopic, internal_topic
from topology.specs import TopicSpec


async def _readyz_until(client: Client, status: int, attempts: int = 100) -> dict[str, Any]:
    for _ in range(attempts):
        response = await client.get("/readyz")
        if response.status == status:
            body: dict[str, Any] = await response.json()
            return body
        await asyncio.sleep(0.1)
    raise AssertionError(f"/readyz never answered {status}")


async def test_ready_once_topics_are_verified(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory
) -> None:
    client = await aiohttp_client(create_app(make_settings()))
    health = await client.get("/healthz")
    assert health.status == 200
    body = await _readyz_until(client, 200)
    assert body["ready"] is True
    assert set(body["checks"]) == {
        "kafka",
        "internal_topics",
        "catalog",
        "ownership",
        "object_store",
        "serving",
        "tier",
    }
    tier = body["checks"]["tier"]
    assert (tier["ok"], tier["lag_bytes"], tier["last_error"]) == (True, 0, None)
    ownership = body["checks"]["ownership"]
    assert ownership["detail"] == "owns 8/8 slots: 0,1,2,3,4,5,6,7"
    assert ownership["owned_slots"] == list(range(8))
    assert ownership["slot_count"] == 8
    assert ownership["initialising"] == []
    assert ownership["unroutable_slots"] == []
    assert ownership["joined"] is True
    assert isinstance(body["checks"]["catalog"]["replayed_records"], int)
    assert isinstance(body["checks"]["internal_topics"]["created"], list)
    assert all(check["ok"] for check in body["checks"].values())


async def test_not_ready_without_a_broker(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory
) -> None:
    settings = make_settings(bootstrap_servers="127.0.0.1:1", kafka_timeout_ms=500)
    client = await aiohttp_client(create_app(settings))
    assert (await client.get("/healthz")).status == 200
    response = await client.get("/readyz")
    assert response.status == 503
    assert response.headers["Retry-After"] == "1"
    body = await response.json()
    assert body["error"]["code"] == "not_ready"
    assert "kafka" in body["error"]["message"]
    assert body["checks"]["kafka"]["ok"] is False


async def test_a_misconfigured_internal_topic_is_fatal(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory
) -> None:
    settings: Settings = make_settings()
    app = create_app(settings)
    client = await aiohttp_client(app)
    producers = internal_topic(settings.topic_prefix, InternalTopic.PRODUCERS)
    await _readyz_until(client, 200)
    await app[ADMIN].delete_topics([producers])
    await app[ADMIN].ensure([TopicSpec(producers, 1, 1, {"cleanup.policy": "delete"})])

    fresh = create_app(settings)
    await aiohttp_client(fresh)
    error = await asyncio.wait_for(fresh[FATAL], timeout=30)
    assert isinstance(error, TopologyMismatch)
    assert producers in str(error)


async def test_unknown_routes_answer_json_errors(client: Client) -> None:
    missing = await client.get("/no/such/route/here")
    assert missing.status == 404
    assert (await missing.json())["error"]["code"] == "not_found"
    wrong_method = await client.post("/healthz")
    assert wrong_method.status == 405
    assert (await wrong_method.json())["error"]["code"] == "method_not_allowed"
    assert "GET" in wrong_method.headers["Allow"]
