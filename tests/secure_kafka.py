"""A secured Kafka broker for the session (SASL_SSL SCRAM, mTLS, ACLs; devstack/secure_kafka.py),
and what the tests against it share: the settings of an instance granted the documented ACLs,
and a walk through what an instance does to Kafka, saying where it first fails.

Always a private broker (never the shared one): its listeners and users are its own.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from adapter.config import Settings
from devstack import secure_kafka
from devstack.secure_kafka import SecureKafka
from tests.conftest import Client, SettingsFactory
from tests.services import DISCARD_S
from topology.naming import bucket_topic

TEXT = {"Content-Type": "text/plain"}
JSON = {"Content-Type": "application/json"}
READY_WAIT_S = 30.0


@pytest.fixture(scope="session")
def secured_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureKafka]:
    kafka = secure_kafka.start(tmp_path_factory.mktemp("secure-kafka"))
    try:
        yield kafka
    finally:
        secure_kafka.stop(kafka, DISCARD_S)


def secure_settings(
    make_settings: SettingsFactory,
    bootstrap: str,
    prefix: str,
    properties: Mapping[str, str],
    **more: Any,
) -> Settings:
    """An instance on the secured broker: its own prefix, the given client properties, a tier
    that frees records soon after they are written (so DeleteRecords is exercised)."""
    chosen: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "topic_prefix": prefix,
        "kafka_client": tuple(properties.items()),
        "partitions": 1,
        "write_slots": 2,
        "tier_after_bytes": 1024,
        "tier_after_ms": 0,
        "tier_interval_ms": 200,
        "hot_cache_bytes": 0,
        "long_poll_timeout_ms": 500,
        "mount_topics": "orders-*",  # the existing topics these tests mount over HTTP
    }
    return make_settings(**(chosen | more))


def transactions_ready(kafka: SecureKafka) -> None:
    """A transaction begun once as the super user: a fresh broker creates its transaction
    state topic then, rather than while an adapter starts (slow on a loaded machine)."""
    config = {"bootstrap.servers": kafka.sasl_bootstrap, **kafka.sasl_properties("admin")}
    Producer({**config, "transactional.id": "warm-up"}).init_transactions(120)


def new_prefix() -> str:
    return f"sec{uuid.uuid4().hex[:8]}."


async def readiness(client: Client) -> dict[str, Any]:
    body: dict[str, Any] = await (await client.get("/readyz")).json()
    return body


async def ready_or_why(client: Client, wait_s: float = READY_WAIT_S) -> str | None:
    """None once `/readyz` says ready; else the failing checks' details, as soon as one
    names an ACL's refusal, or after `wait_s`."""
    deadline = asyncio.get_running_loop().time() + wait_s
    while True:
        report = await readiness(client)
        if report["ready"]:
            return None
        failing = {k: v["detail"] for k, v in report["checks"].items() if not v["ok"]}
        if "DENIED" in str(failing) or asyncio.get_running_loop().time() >= deadline:
            return json.dumps(failing)
        await asyncio.sleep(0.2)


async def until_detail(client: Client, check: str, text: str, wait_s: float = 60) -> str:
    """The check's detail once it contains `text` (AssertionError with the last one if never)."""
    detail = ""
    for _ in range(int(wait_s / 0.2)):
        detail = str((await readiness(client))["checks"][check]["detail"])
        if text in detail:
            return detail
        await asyncio.sleep(0.2)
    raise AssertionError(f"{check} never said {text!r}; last: {detail!r}")


@dataclass
class Walk:
    """What an instance did on Kafka, step by step, until the first failure."""

    bucket: str
    steps: list[str]
    failure: str | None = None  # "<step>: <what the server answered>"


async def _expect(walk: Walk, step: str, response: Any, *statuses: int) -> bool:
    if response.status in statuses:
        walk.steps.append(step)
        return True
    walk.failure = f"{step}: {response.status} {await response.text()}"
    return False


async def walk_through(
    client: Client,
    kafka: SecureKafka,
    prefix: str,
    mounted_topic: str | None = None,
    before_delete: Callable[[str], None] = lambda _bucket: None,
) -> Walk:
    """Create a bucket and a stream, append idempotently, read (catch-up and SSE), publish a
    snapshot, fork, wait for the tier to free records, mount `mounted_topic`, delete the
    bucket: everything an instance asks of Kafka, stopping at the first failure."""
    walk = Walk(f"w{uuid.uuid4().hex[:8]}", [])
    if not await _streams(client, walk) or not await _derived(client, walk):
        return walk
    if not await _tiered(client, walk, kafka, bucket_topic(prefix, walk.bucket)):
        return walk
    if mounted_topic is not None and not await _mounted(client, walk, mounted_topic):
        return walk
    await asyncio.to_thread(before_delete, walk.bucket)
    for stream in ("fork", "doc"):
        response = await client.delete(f"/{walk.bucket}/{stream}")
        if not await _expect(walk, f"delete stream {stream}", response, 204):
            return walk
    await _expect(walk, "delete bucket", await client.delete(f"/{walk.bucket}"), 204)
    return walk


async def _streams(client: Client, walk: Walk) -> bool:
    path = f"/{walk.bucket}/doc"
    if not await _expect(walk, "create bucket", await client.put(f"/{walk.bucket}"), 201):
        return False
    if not await _expect(walk, "create stream", await client.put(path, headers=TEXT), 201):
        return False
    for seq in (0, 1, 2, 3, 3):  # the last one a retry: answered as a duplicate
        headers = {**TEXT, "Producer-Id": "p1", "Producer-Epoch": "0", "Producer-Seq": str(seq)}
        response = await client.post(path, data=b"x" * 700, headers=headers)
        if not await _expect(walk, f"idempotent append {seq}", response, 200, 204):
            return False
    response = await client.get(path, params={"offset": "-1"})
    if not await _expect(walk, "catch-up read", response, 200):
        return False
    response = await client.get(path, params={"offset": "-1", "live": "sse"})
    return await _expect(walk, "SSE read", response, 200)


async def _derived(client: Client, walk: Walk) -> bool:
    path = f"/{walk.bucket}/doc"
    tail = (await client.head(path)).headers["Stream-Next-Offset"]
    blob = {"Content-Type": "application/x-state"}
    response = await client.put(f"{path}/snapshot/{tail}", data=b"state", headers=blob)
    if not await _expect(walk, "snapshot", response, 201, 204):
        return False
    headers = {**TEXT, "Stream-Forked-From": path}
    response = await client.put(f"/{walk.bucket}/fork", headers=headers)
    return await _expect(walk, "fork", response, 201)


async def _tiered(client: Client, walk: Walk, kafka: SecureKafka, topic: str) -> bool:
    """The tier worker moved the stream's old records out and freed them in Kafka (the
    partition's log start moved, as the super user sees it)."""
    for _ in range(150):
        tier = (await readiness(client))["checks"]["tier"]
        if tier["last_error"]:
            walk.failure = f"tier: {tier['last_error']}"
            return False
        if await asyncio.to_thread(log_start, kafka, topic) > 0:
            walk.steps.append("tier and free records")
            return True
        await asyncio.sleep(0.2)
    walk.failure = f"tier: never freed records ({tier['detail']})"
    return False


def log_start(kafka: SecureKafka, topic: str) -> int:
    config = {"bootstrap.servers": kafka.sasl_bootstrap, **kafka.sasl_properties("admin")}
    consumer = Consumer({**config, "group.id": "admin-watermarks"})
    try:
        low, _ = consumer.get_watermark_offsets(TopicPartition(topic, 0), 10, cached=False)
        return int(low)
    finally:
        consumer.close()


async def _mounted(client: Client, walk: Walk, topic: str) -> bool:
    bucket = f"{walk.bucket}-m"
    mount = json.dumps({"mount": {"topic": topic}})
    # 202: mounted, its index still catching up (a topic it cannot read never catches up)
    made = await client.put(f"/{bucket}", data=mount, headers=JSON)
    if not await _expect(walk, "mount", made, 201, 202):
        return False
    for _ in range(150):
        body = await (await client.get(f"/{bucket}")).json()
        if body.get("index", {}).get("caught_up"):
            response = await client.get(f"/{bucket}/k", params={"offset": "-1"})
            return await _expect(walk, "read mounted key", response, 200)
        await asyncio.sleep(0.2)
    walk.failure = f"mount: never indexed ({body})"
    return False


def existing_topic(kafka: SecureKafka, topic: str, values: list[bytes]) -> None:
    """A topic a platform team made and filled (as the super user), keyed `k`."""
    admin = kafka.admin()
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer(
        {"bootstrap.servers": kafka.sasl_bootstrap, **kafka.sasl_properties("admin")}
    )
    for value in values:
        producer.produce(topic, value, b"k")
    assert producer.flush(30) == 0


def read_committed(
    bootstrap: str, properties: Mapping[str, str], prefix: str, bucket: str
) -> list[bytes]:
    """Every committed value of the bucket's topic, read by a plain consumer with the same
    client properties (its group id under the prefix: the ACLs grant no other)."""
    config = {
        "bootstrap.servers": bootstrap,
        **properties,
        "group.id": f"{prefix}check",
        "isolation.level": "read_committed",
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
    }
    consumer = Consumer(config)
    values: list[bytes] = []
    try:
        # From the log start (the tier freed what was below it).
        consumer.assign([TopicPartition(bucket_topic(prefix, bucket), 0, OFFSET_BEGINNING)])
        while (message := consumer.poll(10)) is not None:
            error = message.error()
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                return values
            assert error is None, error
            values.append(message.value() or b"")
    finally:
        consumer.close()
    raise AssertionError("no end of partition within 10 s")


def logged(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def takes_certificate(kafka: SecureKafka, cert: Path, key: Path) -> bool:
    """Whether the mTLS listener lets a client presenting `cert` in: a metadata request
    answered within 5 s (a refused handshake is retried until then, and fails)."""
    properties = kafka.mtls_properties() | {
        "ssl.certificate.location": str(cert),
        "ssl.key.location": str(key),
    }
    admin = AdminClient({"bootstrap.servers": kafka.ssl_bootstrap, "log_level": 0, **properties})
    try:
        return bool(admin.list_topics(timeout=5).brokers)
    except KafkaException:
        return False
