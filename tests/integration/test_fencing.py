"""Two adapters on one topic prefix: the newer fences the older through Kafka, for good."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest

from tests.adapter_process import running_adapter

TEXT = {"Content-Type": "text/plain"}

pytestmark = pytest.mark.faults


async def _post(session: aiohttp.ClientSession, url: str, body: bytes) -> int:
    async with session.post(url, data=body, headers=TEXT) as reply:
        return reply.status


@pytest.mark.timeout(180)
async def test_a_fenced_instance_stops_writing_and_never_fences_back(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    env = {
        "DURABLE_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "DURABLE_KAFKA_TOPIC_PREFIX": f"fence{unique}.",
        "DURABLE_KAFKA_COLD_DIR": str(tmp_path / "cold"),
        "DURABLE_KAFKA_KAFKA_TIMEOUT_MS": "3000",
    }
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        with running_adapter(env, tmp_path / "old.log") as old:
            stream = "/v1/stream/s"
            assert (await session.put(old + stream, headers=TEXT)).status == 201
            assert await _post(session, old + stream, b"a") == 204
            with running_adapter(env, tmp_path / "new.log") as new:  # fences the old writer
                assert await _post(session, new + stream, b"b") == 204
                for _ in range(3):  # the old one answers 503, and stays fenced
                    assert await _post(session, old + stream, b"zombie") == 503
                    assert await _post(session, new + stream, b"c") == 204
                    await asyncio.sleep(0.2)
                async with session.get(new + stream, params={"offset": "-1"}) as reply:
                    assert await reply.read() == b"abccc"
    assert "fenced" in (tmp_path / "old.log").read_text()
