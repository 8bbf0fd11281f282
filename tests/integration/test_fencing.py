"""Two adapters on one topic prefix share it: writes are forwarded to the slot's owner."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from devstack.process import free_port
from tests.adapter_process import running_adapter
from tests.cluster import (
    TEXT,
    cluster_env,
    stream_in,
    two_instances,
    until_owned,
    until_read,
)
from topology.slots import SlotMap

pytestmark = [pytest.mark.integration, pytest.mark.faults]


async def _post(session: aiohttp.ClientSession, url: str, body: bytes) -> int:
    async with session.post(url, data=body, headers=TEXT) as reply:
        return reply.status


async def _read(session: aiohttp.ClientSession, url: str) -> bytes:
    async with session.get(url, params={"offset": "-1"}) as reply:
        assert reply.status == 200
        return await reply.read()


def _fill_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in (b"a", b"b"):
        producer.produce(topic, value, b"k")
    assert producer.flush(30) == 0


@pytest.mark.timeout(180)
async def test_two_instances_share_a_prefix_and_read_their_writes(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    prefix = f"share{unique}."
    env = cluster_env(kafka_bootstrap, prefix, tmp_path) | {"DURABLE_KAFKA_MOUNT_TOPICS": "fwd-*"}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        with running_adapter(env, tmp_path / "old.log", free_port()) as old:
            stream = "/v1/stream/s"
            assert (await session.put(old + stream, headers=TEXT)).status == 201
            assert await _post(session, old + stream, b"a") == 204
            with running_adapter(env, tmp_path / "new.log", free_port()) as new:
                owners = await until_owned(session, {old: None, new: None})
                for _ in range(3):  # neither is fenced for good: both keep writing
                    assert await _post(session, old + stream, b"b") == 204
                    assert await _post(session, new + stream, b"c") == 204
                assert await _read(session, new + stream) == b"abcbcbc"
                # The last append went through `new`: when `new` owns the stream, `old` has it
                # once its follower has applied it.
                assert (
                    await until_read(lambda: _read(session, old + stream), b"abcbcbc") == b"abcbcbc"
                )

                # Read-your-writes through the instance that forwarded the append.
                owned_by_old = stream_in(prefix, owners[old], "r")
                url = f"{new}/v1/stream/{owned_by_old}"
                assert (await session.put(url, headers=TEXT)).status == 201
                async with session.post(url, data=b"forwarded", headers=TEXT) as reply:
                    assert reply.status == 204
                    request_id = reply.headers["X-Request-Id"]
                assert await _read(session, url) == b"forwarded"
                # The owner logged the forwarded append under the id the client was given
                # (request lines are written by a background thread within 50 ms).
                logged = f'"request_id": "{request_id}"'
                for _ in range(100):
                    if logged in (tmp_path / "old.log").read_text():
                        break
                    await asyncio.sleep(0.05)
                assert logged in (tmp_path / "old.log").read_text()
                # Written through the owner, read through the other: seen within moments.
                assert await _post(session, f"{old}/v1/stream/{owned_by_old}", b"+") == 204
                assert await until_read(lambda: _read(session, url), b"forwarded+") == b"forwarded+"

                # Bucket operations go to the owner of the bucket's slot.
                slots = SlotMap(prefix, 8)
                bucket = next(
                    f"bucket{i}"
                    for i in range(1000)
                    if slots.of_bucket(f"bucket{i}") in owners[old]
                )
                async with session.put(f"{new}/{bucket}") as reply:
                    assert reply.status == 201, await reply.text()
                async with session.get(f"{new}/{bucket}") as reply:
                    assert reply.status == 200
                async with session.delete(f"{new}/{bucket}") as reply:
                    assert reply.status == 204
                async with session.get(f"{new}/{bucket}") as reply:
                    assert reply.status == 404

                # A mount made through the instance that forwarded it: that instance indexes
                # the topic too, and its 201 means it serves the records at once.
                topic = f"fwd-{unique}"
                await asyncio.to_thread(_fill_topic, kafka_bootstrap, topic)
                body = {"mount": {"topic": topic, "content_type": "text/plain"}}
                mounted = next(
                    f"mount{i}" for i in range(1000) if slots.of_bucket(f"mount{i}") in owners[old]
                )
                async with session.put(f"{new}/{mounted}", json=body) as reply:
                    assert reply.status == 201, await reply.text()
                async with session.get(f"{new}/{mounted}/k", params={"offset": "-1"}) as reply:
                    assert reply.status == 200, await reply.text()
                    assert await reply.read() == b"ab"


@pytest.mark.timeout(60)
async def test_a_forwarded_write_is_never_forwarded_again(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    prefix = f"loop{unique}."
    async with two_instances(kafka_bootstrap, prefix, tmp_path) as pair:
        stream = stream_in(prefix, pair.owners[pair.a], "f")
        headers = TEXT | {"Durable-Kafka-Forwarded": "1"}
        async with pair.session.put(f"{pair.b}/v1/stream/{stream}", headers=headers) as reply:
            assert reply.status == 503
            assert reply.headers["Retry-After"] == "1"
            assert (await reply.json())["error"]["code"] == "unavailable"
