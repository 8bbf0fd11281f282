"""Bucket routes over HTTP on a real broker: create, describe, list with cursors, delete."""

from __future__ import annotations

import asyncio
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import Client
from topology.naming import bucket_topic


async def _json(client: Client, method: str, path: str, status: int) -> Any:
    response = await client.request(method, path)
    assert response.status == status, await response.text()
    return await response.json() if response.content_type == "application/json" else None


async def _error_code(client: Client, method: str, path: str, status: int) -> str:
    body = await _json(client, method, path, status)
    code: str = body["error"]["code"]
    return code


async def test_bucket_lifecycle(client: Client, unique: str) -> None:
    bucket = f"b-{unique}"
    created = await _json(client, "PUT", f"/{bucket}", 201)
    assert created["bucket_id"] == bucket
    assert await _error_code(client, "PUT", f"/{bucket}", 409) == "bucket_exists"
    described = await _json(client, "GET", f"/{bucket}", 200)
    assert (described["bucket_id"], described["streams"]) == (bucket, 0)

    assert (await client.put(f"/{bucket}/s1", data=b"x")).status == 201
    assert (await _json(client, "GET", f"/{bucket}", 200))["streams"] == 1
    assert await _error_code(client, "DELETE", f"/{bucket}", 409) == "bucket_not_empty"
    assert (await client.delete(f"/{bucket}/s1")).status == 204
    assert (await client.delete(f"/{bucket}")).status == 204
    assert await _error_code(client, "GET", f"/{bucket}", 404) == "bucket_not_found"
    assert (await client.put(f"/{bucket}")).status == 201  # the name can be used again


async def test_identifier_rules(client: Client, unique: str) -> None:
    assert await _error_code(client, "PUT", "/abc", 400) == "invalid_bucket_id"
    assert await _error_code(client, "PUT", "/Upper-Case", 400) == "invalid_bucket_id"
    assert await _error_code(client, "PUT", "/healthz", 400) == "invalid_bucket_id"
    bucket = f"ids-{unique}"
    await _json(client, "PUT", f"/{bucket}", 201)
    assert await _error_code(client, "PUT", f"/{bucket}/streams", 400) == "invalid_stream_id"
    assert await _error_code(client, "PUT", f"/{bucket}/{'x' * 123}", 400) == "invalid_stream_id"
    assert await _error_code(client, "PUT", f"/{bucket}/a%2Fb", 400) == "invalid_stream_id"
    assert await _error_code(client, "PUT", f"/{bucket}/a..b", 400) == "invalid_stream_id"


async def test_streams_never_create_buckets(client: Client, unique: str) -> None:
    code = await _error_code(client, "PUT", f"/nobucket-{unique}/s", 404)
    assert code == "bucket_not_found"
    # The flat /v1/stream surface creates its bucket on demand.
    assert (await client.put(f"/v1/stream/flat-{unique}/s")).status == 201
    assert (await _json(client, "GET", f"/flat-{unique}", 200))["streams"] == 1


async def test_listing_is_sorted_filtered_and_paginated(client: Client, unique: str) -> None:
    bucket = f"list-{unique}"
    await _json(client, "PUT", f"/{bucket}", 201)
    names = ["user-3", "user-1", "team-1", "user-2", "user-10"]
    for name in names:
        response = await client.put(f"/{bucket}/{name}", headers={"Content-Type": "text/plain"})
        assert response.status == 201
    await client.post(f"/{bucket}/user-2", data=b"hello", headers={"Content-Type": "text/plain"})

    everything = await _json(client, "GET", f"/{bucket}/streams", 200)
    assert [s["stream_id"] for s in everything["streams"]] == sorted(names)
    assert everything["has_more"] is False

    first = await _json(client, "GET", f"/{bucket}/streams?prefix=user-&limit=2", 200)
    assert [s["stream_id"] for s in first["streams"]] == ["user-1", "user-10"]
    assert (first["has_more"], first["next_cursor"]) == (True, "user-10")
    second = await _json(
        client, "GET", f"/{bucket}/streams?prefix=user-&limit=2&after=user-10", 200
    )
    assert [s["stream_id"] for s in second["streams"]] == ["user-2", "user-3"]
    assert second["has_more"] is False

    entry = second["streams"][0]
    assert entry["status"] == "Open"
    assert entry["content_type"] == "text/plain"
    assert entry["last_write_at_ms"] >= entry["created_at_ms"]
    for bad in ("limit=0", "limit=1001", "limit=x"):
        assert await _error_code(client, "GET", f"/{bucket}/streams?{bad}", 400) == "invalid_query"


async def test_deleting_a_bucket_never_orphans_a_stream_created_meanwhile(
    client: Client, unique: str
) -> None:
    for attempt in range(5):
        bucket = f"race{attempt}-{unique}"
        await _json(client, "PUT", f"/{bucket}", 201)
        create, delete = await asyncio.gather(
            client.put(f"/{bucket}/s", headers={"Content-Type": "text/plain"}),
            client.delete(f"/{bucket}"),
        )
        if delete.status == 204:  # the bucket went first: the stream must not exist
            assert create.status == 404
            assert (await client.get(f"/{bucket}")).status == 404
        else:  # the stream went first: the bucket stays, with its stream
            assert (create.status, delete.status) == (201, 409)
            assert (await client.head(f"/{bucket}/s")).status == 200


async def test_a_foreign_topic_in_the_way_is_a_conflict(
    client: Client, unique: str, kafka_bootstrap: str
) -> None:
    """A compacted topic where the bucket's topic would be is refused, never written to."""
    bucket = f"taken-{unique}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    topic = bucket_topic(f"t{unique}.", bucket)
    new = NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})
    await asyncio.wrap_future(admin.create_topics([new], request_timeout=10)[topic])
    body = await _json(client, "PUT", f"/{bucket}", 409)
    assert body["error"]["code"] == "topic_conflict"
    assert "cleanup.policy" in body["error"]["message"]
    assert await _error_code(client, "GET", f"/{bucket}", 404) == "bucket_not_found"
