"""A forwarded write is carried out only by the owner generation it was routed to.

The forwarding instance names the owner record it routed on (`Durable-Kafka-Owner-Mark`).
Once that record is superseded, the forwarder concludes the former owner is fenced and that
the log holds whatever it wrote, so it may send the write on to the slot's next owner. That is
only sound if no later generation of the same instance (one that lost the slot and took it
again) carries out a write routed to an earlier one: it would be written twice.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from tests.cluster import TEXT, partitions, slot_of, stream_in, two_instances
from tests.kafka_reads import committed_messages
from topology.internal_records import owner_key
from topology.naming import InternalTopic, internal_topic
from topology.placement import partition_for
from topology.wire import CONTROL_HEADER, header_value

pytestmark = pytest.mark.integration

FORWARDED = {"Durable-Kafka-Forwarded": "1"}


def _owner_mark(bootstrap: str, prefix: str, slot: int) -> int:
    """The offset of the slot's latest owner record, as a fresh consumer reads it."""
    topic = internal_topic(prefix, InternalTopic.OWNERS)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "never-joined",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    mark = -1
    try:
        while (message := consumer.poll(10)) is not None and message.error() is None:
            if message.key() == owner_key(slot).encode():
                mark = message.offset() or 0
    finally:
        consumer.close()
    return mark


async def test_a_write_routed_to_an_earlier_owner_generation_is_not_carried_out(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    prefix = f"gen{unique}."
    async with two_instances(kafka_bootstrap, prefix, tmp_path) as pair:
        stream = stream_in(prefix, pair.owners[pair.b], "g")
        url = f"{pair.b}/v1/stream/{stream}"
        assert (await pair.session.put(url, headers=TEXT)).status == 201
        mark = _owner_mark(kafka_bootstrap, prefix, slot_of(prefix, stream))
        assert mark >= 0
        routed = FORWARDED | TEXT
        # Routed on a record the slot's owner has since superseded, or on one it never saw.
        for stale in (mark - 1, mark + 1_000):
            headers = routed | {"Durable-Kafka-Owner-Mark": str(stale)}
            async with pair.session.post(url, data=f"stale{stale}", headers=headers) as reply:
                assert reply.status == 503, await reply.text()
                body = await reply.json()
                assert body["error"]["code"] == "unavailable"
        # Routed on the owner's own record: carried out.
        headers = routed | {"Durable-Kafka-Owner-Mark": str(mark)}
        async with pair.session.post(url, data="current", headers=headers) as reply:
            assert reply.status == 204, await reply.text()
        # And through the other instance, which routes on what its catalog shows.
        async with pair.session.post(f"{pair.a}/v1/stream/{stream}", data="!", headers=TEXT) as r:
            assert r.status == 204, await r.text()
    partition = partition_for(stream.encode(), partitions(prefix))
    messages = committed_messages(kafka_bootstrap, f"{prefix}bucket._default", partition)
    stored = [
        m.value() or b""
        for m in messages
        if m.key() == stream.encode() and header_value(m.headers(), CONTROL_HEADER) is None
    ]
    assert stored == [b"current", b"!"]
    assert not any(value.startswith(b"stale") for value in stored)
