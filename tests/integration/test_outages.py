"""An instance stays ready through an outage of S3 or of Kafka, answering what it still can and
reporting the dependency in `/readyz`: every instance sees the same outage, and a load balancer
that dropped them all would refuse the reads (and, without S3, the writes) they still serve.
The broker and MinIO are this test's own, to be stopped."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from devstack import kafka, minio
from devstack.process import free_port
from tests.adapter_process import running_adapter
from tests.services import DISCARD_S

TEXT = {"Content-Type": "text/plain"}


async def _health(session: aiohttp.ClientSession, base: str) -> tuple[int, int, dict[str, Any]]:
    """(/healthz status, /readyz status, /readyz body)."""
    async with session.get(f"{base}/healthz") as live, session.get(f"{base}/readyz") as ready:
        body: dict[str, Any] = await ready.json()
        return live.status, ready.status, body


async def _until_check(
    session: aiohttp.ClientSession, base: str, check: str, ok: bool
) -> tuple[int, int, dict[str, Any]]:
    """Until `/readyz` reports `check` as `ok` (the supervisor looks every 2 s)."""
    for _ in range(300):
        live, ready, body = await _health(session, base)
        if body["checks"][check]["ok"] is ok:
            return live, ready, body
        await asyncio.sleep(0.2)
    raise AssertionError(f"{check} never became ok={ok}: {body}")


@pytest.mark.timeout(240)
async def test_the_instance_stays_ready_and_serves_through_outages(tmp_path: Any) -> None:
    broker = kafka.KafkaNode(home=tmp_path / "kafka", port=free_port(), controller_port=free_port())
    store = minio.MinioNode(home=tmp_path / "minio", port=free_port(), console_port=free_port())
    env = {
        "DURABLE_KAFKA_BOOTSTRAP_SERVERS": kafka.start(broker),
        "DURABLE_KAFKA_COLD_BACKEND": "s3",
        "DURABLE_KAFKA_S3_ENDPOINT_URL": minio.start(store),
        "DURABLE_KAFKA_S3_ACCESS_KEY_ID": minio.ACCESS_KEY,
        "DURABLE_KAFKA_S3_SECRET_ACCESS_KEY": minio.SECRET_KEY,
        "DURABLE_KAFKA_S3_BUCKET": "outages",
        "DURABLE_KAFKA_KAFKA_TIMEOUT_MS": "2000",
    }
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
            with running_adapter(env, tmp_path / "adapter.log") as base:
                stream = f"{base}/v1/stream/s"
                assert (await session.put(stream, headers=TEXT, data=b"a")).status == 201

                # S3 down: still ready; appends and reads of the hot tail answer.
                await asyncio.to_thread(minio.stop, store, DISCARD_S)
                live, ready, body = await _until_check(session, base, "object_store", False)
                assert (live, ready, body["ready"]) == (200, 200, True), body
                assert body["failing"] == ["object_store"]
                async with session.post(stream, headers=TEXT, data=b"b") as reply:
                    assert reply.status == 204, await reply.text()
                async with session.get(stream, params={"offset": "-1"}) as reply:
                    assert (reply.status, await reply.read()) == (200, b"ab")
                async with session.put(f"{base}/v1/stream/t", headers=TEXT) as reply:
                    assert reply.status == 201, await reply.text()
                await asyncio.to_thread(minio.start, store)
                await _until_check(session, base, "object_store", True)

                # Kafka down: still ready; reads of the hot tail answer, writes 503 at once.
                await asyncio.to_thread(kafka.stop, broker)
                live, ready, body = await _until_check(session, base, "kafka", False)
                assert (live, ready, body["ready"]) == (200, 200, True), body
                assert "kafka" in body["failing"]
                async with session.get(stream, params={"offset": "-1"}) as reply:
                    assert (reply.status, await reply.read()) == (200, b"ab")
                async with session.post(stream, headers=TEXT, data=b"c") as reply:
                    assert reply.status == 503, await reply.text()
                    assert reply.headers["Retry-After"] == "1"
                    assert (await reply.json())["error"]["code"] == "unavailable"
                async with session.put(f"{base}/v1/stream/u", headers=TEXT) as reply:
                    assert reply.status == 503, await reply.text()
    finally:
        minio.stop(store, DISCARD_S)
        kafka.stop(broker, DISCARD_S)
