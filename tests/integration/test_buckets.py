"""Bucket routes over HTTP on a real broker: create, describe, list with cursors, delete."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable
from typing import Any, Protocol

from aiohttp import web
from confluent_kafka.admin import AdminClient, NewTopic

from adapter.app import PARTS, create_app
from adapter.state.catalog import Catalog
from devstack.process import free_port
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready
from tests.kafka_reads import compacted_entries
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


ROUNDS = 6
TASKS = 50


def _mix(rng: random.Random, bucket: str, task: int) -> tuple[str, str]:
    """One request of the churn: the bucket or one of five streams, created or deleted."""
    stream = f"s{task % 5}"
    return rng.choice(
        [
            ("PUT", f"/{bucket}"),
            ("DELETE", f"/{bucket}"),
            ("PUT", f"/{bucket}/{stream}"),
            ("PUT", f"/v1/stream/{bucket}/{stream}"),  # creates the bucket on demand
            ("DELETE", f"/{bucket}/{stream}"),
        ]
    )


def _bucket_topics(bootstrap: str, prefix: str) -> set[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return {name for name in admin.list_topics(timeout=10).topics if name.startswith(prefix)}


def _view(catalog: Catalog) -> dict[str, object]:
    """What a catalog says of every bucket it knows: its record, its streams' records."""
    return {
        bucket_id: (
            catalog.bucket(bucket_id),
            [catalog.stream(bucket_id, s) for s in catalog.stream_ids(bucket_id, "", None)],
        )
        for bucket_id in catalog.bucket_ids()
    }


async def test_bucket_and_stream_churn_leaves_no_orphan_and_no_5xx(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, kafka_bootstrap: str
) -> None:
    """50 tasks creating and deleting one bucket and its streams."""
    settings = make_settings(partitions=12)
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    catalog = client.app[PARTS].catalog
    bucket, rng = "churn", random.Random(14)
    deadline_s = client.app[PARTS].buckets.deadline_s
    topic = bucket_topic(settings.topic_prefix, bucket)

    async def timed(method: str, path: str) -> tuple[int, float, str]:
        started = time.monotonic()
        response = await client.request(method, path, headers={"Content-Type": "text/plain"})
        return response.status, time.monotonic() - started, f"{method} {path}"

    for _ in range(ROUNDS):
        requests = [_mix(rng, bucket, task) for task in range(TASKS)]
        answers = await asyncio.gather(*(timed(*request) for request in requests))
        assert [a for a in answers if a[0] >= 500 or a[1] > deadline_s] == []
        registered = catalog.bucket(bucket) is not None
        assert _bucket_topics(kafka_bootstrap, f"{settings.topic_prefix}bucket.") == (
            {topic} if registered else set()
        )
        for stream in rng.sample(range(5), rng.randint(0, 5)):  # start the next round anew
            assert (await client.delete(f"/{bucket}/s{stream}")).status in (204, 404)
        assert (await client.delete(f"/{bucket}")).status in (204, 404, 409)
    if catalog.bucket(bucket) is None:  # end with something to replay
        assert (await client.put(f"/v1/stream/{bucket}/last")).status == 201

    restarted = await aiohttp_client(create_app(settings))  # replays the same topics
    await wait_ready(restarted)
    assert _view(restarted.app[PARTS].catalog) == _view(catalog)


async def _drop_topic(bootstrap: str, topic: str) -> None:
    """Delete a bucket's topic behind the adapter's back, as a half-done deletion leaves it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    await asyncio.wrap_future(admin.delete_topics([topic], operation_timeout=10)[topic])
    for _ in range(100):
        if topic not in admin.list_topics(timeout=10).topics:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{topic} still listed 10 s after its deletion")


async def test_a_bucket_whose_topic_vanished_gets_it_back(
    client: Client, unique: str, kafka_bootstrap: str
) -> None:
    bucket = f"vanish-{unique}"
    topic = bucket_topic(f"t{unique}.", bucket)
    await _json(client, "PUT", f"/{bucket}", 201)
    await _drop_topic(kafka_bootstrap, topic)
    started = time.monotonic()  # no write slot held until a flush times out (5 s here)
    assert (await client.put(f"/{bucket}/s", data=b"x")).status == 201
    assert time.monotonic() - started < 3
    assert (await client.get(f"/{bucket}/s?offset=-1")).status == 200
    assert topic in _bucket_topics(kafka_bootstrap, topic)

    assert (await client.delete(f"/{bucket}/s")).status == 204
    await _drop_topic(kafka_bootstrap, topic)
    assert (await client.delete(f"/{bucket}")).status == 204  # a topic already gone: deleted
    assert await _error_code(client, "GET", f"/{bucket}", 404) == "bucket_not_found"


class ServerFactory(Protocol):
    """pytest-aiohttp's `aiohttp_client`, called with the port to serve on."""

    def __call__(
        self, app: web.Application, *, server_kwargs: dict[str, Any]
    ) -> Awaitable[Client]: ...


async def _two_instances(
    aiohttp_client: ServerFactory, make_settings: SettingsFactory
) -> tuple[Client, Client]:
    """Two in-process adapters on one topic prefix, each owning some of the write slots and
    knowing the owner of every other (a write through either is served or forwarded, no 503)."""
    clients = []
    for port in (free_port(), free_port()):
        settings = make_settings(advertise_url=f"http://127.0.0.1:{port}", partitions=12)
        clients.append(await aiohttp_client(create_app(settings), server_kwargs={"port": port}))
    for each in clients:
        await wait_ready(each)
    a, b = clients
    for _ in range(600):
        owned = [each.app[PARTS].writers.ready for each in (a, b)]
        split = all(owned) and len(owned[0] | owned[1]) == a.app[PARTS].writers.count
        if split and not [slot for each in (a, b) for slot in await _unroutable(each)]:
            return a, b
        await asyncio.sleep(0.1)
    raise AssertionError("the two instances never shared the write slots")


async def _unroutable(instance: Client) -> list[int]:
    """The slots whose writes `instance` would answer 503 now (`/readyz`, `ownership`)."""
    async with instance.get("/readyz") as reply:
        return list((await reply.json())["checks"]["ownership"]["unroutable_slots"])


def _owned_streams(instance: Client, bucket: str) -> list[str]:
    """Four stream ids of `bucket` whose write slots `instance` owns."""
    parts = instance.app[PARTS]
    ids = (f"s{i}" for i in range(1000))
    return [s for s in ids if parts.streams.slot_of(bucket, s) in parts.writers.ready][:4]


async def test_two_instances_creating_one_bucket_on_demand_keep_its_streams(
    aiohttp_client: ServerFactory, make_settings: SettingsFactory, unique: str, kafka_bootstrap: str
) -> None:
    """Both instances may write the bucket's record; no stream is lost
    from its list, even replayed as compaction leaves the log, and the bucket (whose topic
    holds their data) cannot be deleted."""
    a, b = await _two_instances(aiohttp_client, make_settings)
    bucket = f"od-{unique}"
    by_owner = {each: _owned_streams(each, bucket) for each in (a, b)}
    streams = sorted(by_owner[a] + by_owner[b])
    # Each owner creates the bucket for its own streams; asked through the other instance,
    # which answers once its own catalog shows the stream (read-your-writes).
    answers = await asyncio.gather(
        *(
            other.put(f"/v1/stream/{bucket}/{stream}", data=stream.encode())
            for other, owner in ((a, b), (b, a))
            for stream in by_owner[owner]
        )
    )
    assert [answer.status for answer in answers] == [201] * len(streams)
    replayed = Catalog()  # a fresh instance's replay after compaction
    for key, value in compacted_entries(kafka_bootstrap, a.app[PARTS].buckets.topics.meta):
        replayed.apply(key, value)
    assert list(replayed.stream_ids(bucket, "", None)) == streams
    for each in (a, b):
        listed = await _json(each, "GET", f"/{bucket}/streams", 200)
        assert [s["stream_id"] for s in listed["streams"]] == streams
        assert await _error_code(each, "DELETE", f"/{bucket}", 409) == "bucket_not_empty"
    for stream in streams:
        assert await (await a.get(f"/{bucket}/{stream}?offset=-1")).read() == stream.encode()
