"""Faults with real processes: kill -9 under load, and a broker that goes away."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import aiohttp
import pytest

from devstack import kafka
from devstack.process import free_port
from tests.adapter_process import adapter_pid, running_adapter
from tests.services import DISCARD_S

pytestmark = pytest.mark.faults

PRODUCERS = 4
APPENDS = 60  # per producer
TEXT = {"Content-Type": "text/plain"}


async def _produce(
    session: aiohttp.ClientSession,
    url: str,
    pid: str,
    acked: list[int],
    outcomes: list[tuple[int, float]] | None = None,
) -> None:
    """Send seq 0..APPENDS-1 in order, retrying each until the adapter acknowledges it.

    `outcomes` collects (status, seconds) of every answered attempt (0: connection lost).
    """
    loop = asyncio.get_running_loop()
    for seq in range(APPENDS):
        headers = {**TEXT, "Producer-Id": pid, "Producer-Epoch": "0", "Producer-Seq": str(seq)}
        while True:
            started, status = loop.time(), 0
            try:
                async with session.post(url, data=f"{pid}:{seq}\n", headers=headers) as reply:
                    status = reply.status
                    assert status in (200, 204, 503), await reply.text()
            except (aiohttp.ClientConnectionError, TimeoutError):
                pass  # the adapter is down: retry the very same request
            if outcomes is not None:
                outcomes.append((status, loop.time() - started))
            if status in (200, 204):
                acked.append(seq)
                break
            await asyncio.sleep(0.05)


async def _until_a_third_is_acknowledged(acked: dict[str, list[int]]) -> None:
    """Mid-load: some requests in flight, some transactions open."""
    for _ in range(3000):
        if sum(len(seqs) for seqs in acked.values()) >= PRODUCERS * APPENDS // 3:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the load never got going")


def _assert_exactly_once(body: str, acked: dict[str, list[int]]) -> None:
    lines = body.splitlines()
    for pid, seqs in acked.items():
        assert seqs == list(range(APPENDS))  # every append acknowledged, in order
        mine = [int(line.split(":")[1]) for line in lines if line.startswith(f"{pid}:")]
        assert mine == list(range(APPENDS))  # ... and in the stream exactly once, in order


@pytest.mark.timeout(240)
async def test_kill_9_under_load_applies_each_append_exactly_once(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    env = {
        "DURABLE_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "DURABLE_KAFKA_TOPIC_PREFIX": f"crash{unique}.",
        "DURABLE_KAFKA_COLD_DIR": str(tmp_path / "cold"),
    }
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1/stream/orders"
    acked: dict[str, list[int]] = {f"p{i}": [] for i in range(PRODUCERS)}
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        with running_adapter(env, tmp_path / "first.log", port) as base:
            assert (await session.put(f"{base}/v1/stream/orders", headers=TEXT)).status == 201
            load = [asyncio.create_task(_produce(session, url, p, a)) for p, a in acked.items()]
            await _until_a_third_is_acknowledged(acked)
            os.kill(
                adapter_pid(port), signal.SIGKILL
            )  # mid-load: some requests in flight, some transactions open
        with running_adapter(env, tmp_path / "second.log", port):
            await asyncio.wait_for(asyncio.gather(*load), 180)
            async with session.get(url, params={"offset": "-1"}) as reply:
                body = await reply.text()
    _assert_exactly_once(body, acked)


@pytest.mark.timeout(240)
async def test_appends_fail_fast_while_the_broker_is_down(tmp_path: Path) -> None:
    node = kafka.KafkaNode(home=tmp_path / "kafka", port=free_port(), controller_port=free_port())
    env = {
        "DURABLE_KAFKA_BOOTSTRAP_SERVERS": kafka.start(node),
        "DURABLE_KAFKA_COLD_DIR": str(tmp_path / "cold"),
        "DURABLE_KAFKA_KAFKA_TIMEOUT_MS": "2000",
    }
    try:
        async with aiohttp.ClientSession() as session:
            with running_adapter(env, tmp_path / "adapter.log") as base:
                stream = f"{base}/v1/stream/s"
                assert (await session.put(stream, headers=TEXT, data=b"a")).status == 201
                kafka.stop(node)
                async with session.get(stream, params={"offset": "-1"}) as reply:
                    assert await reply.read() == b"a"  # recent data: served from the hot tail
                started = time.monotonic()
                async with session.post(stream, headers=TEXT, data=b"b") as reply:
                    assert reply.status == 503
                    assert reply.headers["Retry-After"] == "1"
                    assert (await reply.json())["error"]["code"] == "unavailable"
                assert time.monotonic() - started < 20  # bounded by the Kafka timeout
                kafka.start(node)
                for _ in range(60):  # the writer recovers once the broker is back
                    async with session.post(stream, headers=TEXT, data=b"c") as reply:
                        if reply.status == 204:
                            break
                    await asyncio.sleep(1)
                async with session.get(stream, params={"offset": "-1"}) as reply:
                    assert await reply.read() == b"ac"  # the failed append left nothing behind
    finally:
        kafka.stop(node, DISCARD_S)


@pytest.mark.timeout(240)
async def test_broker_restart_under_load_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    node = kafka.KafkaNode(home=tmp_path / "kafka", port=free_port(), controller_port=free_port())
    env = {
        "DURABLE_KAFKA_BOOTSTRAP_SERVERS": kafka.start(node),
        "DURABLE_KAFKA_COLD_DIR": str(tmp_path / "cold"),
        "DURABLE_KAFKA_KAFKA_TIMEOUT_MS": "3000",
    }
    acked: dict[str, list[int]] = {f"p{i}": [] for i in range(PRODUCERS)}
    outcomes: list[tuple[int, float]] = []
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
            with running_adapter(env, tmp_path / "adapter.log") as base:
                url = f"{base}/v1/stream/orders"
                assert (await session.put(url, headers=TEXT)).status == 201
                load = [
                    asyncio.create_task(_produce(session, url, pid, seqs, outcomes))
                    for pid, seqs in acked.items()
                ]
                await _until_a_third_is_acknowledged(acked)
                await asyncio.to_thread(kafka.stop, node)
                await asyncio.sleep(8)  # well past the 3 s Kafka timeout: appends must 503
                await asyncio.to_thread(kafka.start, node)
                await asyncio.wait_for(asyncio.gather(*load), 180)
                async with session.get(url, params={"offset": "-1"}) as reply:
                    body = await reply.text()
    finally:
        kafka.stop(node, DISCARD_S)
    _assert_exactly_once(body, acked)
    assert any(status == 503 for status, _ in outcomes)  # the outage was seen as 503s
    assert max(seconds for _, seconds in outcomes) < 30  # and no request hung
