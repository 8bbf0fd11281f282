"""A transaction the broker refuses fails its requests at once, and the slot writes again after.

After a failed transaction the slot's writer confirms with the owners' group that it still
holds the slot before it starts a new producer. That question once blocked for good (a
writer's thread calling the group consumer while its own thread polled), hanging every later
write of the slot; here it must be answered, and the next write of the slot succeed.
"""

from __future__ import annotations

import asyncio

from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from tests.conftest import Client
from topology.naming import bucket_topic
from topology.placement import partition_for

TEXT = {"Content-Type": "text/plain"}
PARTITIONS = 3  # tests/conftest.py's make_settings


def neighbour_of(stream_id: str) -> str:
    """Another stream id in the same partition (so the same topic-partition and write slot)."""
    partition = partition_for(stream_id.encode(), PARTITIONS)
    return next(
        f"n{i}" for i in range(1000) if partition_for(f"n{i}".encode(), PARTITIONS) == partition
    )


async def lower_max_message_bytes(bootstrap: str, topic: str, limit: int) -> None:
    entry = ConfigEntry(
        "max.message.bytes", str(limit), incremental_operation=AlterConfigOpType.SET
    )
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until it has answered
    futures = admin.incremental_alter_configs([resource])
    await asyncio.wait_for(asyncio.wrap_future(futures[resource]), 30)


async def test_a_refused_transaction_fails_fast_and_the_slot_writes_again(
    client: Client, unique: str, kafka_bootstrap: str
) -> None:
    assert (await client.put("/wall")).status == 201
    first, second = "/wall/a", f"/wall/{neighbour_of('a')}"
    for url in (first, second):
        assert (await client.put(url, headers=TEXT, data=b"kept\n")).status == 201
    await lower_max_message_bytes(kafka_bootstrap, bucket_topic(f"t{unique}.", "wall"), 1024)

    async def scenario() -> None:
        refused = await client.post(first, headers=TEXT, data=b"x" * 4096)
        assert refused.status == 503, await refused.text()
        assert (await refused.json())["error"]["code"] == "unavailable"
        for _ in range(2):  # a fresh producer, after the ownership question was answered
            assert (await client.post(second, headers=TEXT, data=b"more\n")).status == 204

    await asyncio.wait_for(scenario(), 60)
    assert await (await client.get(first, params={"offset": "-1"})).read() == b"kept\n"
    assert await (await client.get(second, params={"offset": "-1"})).read() == b"kept\nmore\nmore\n"
