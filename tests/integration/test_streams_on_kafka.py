"""Streams stay ordinary Kafka data: one record per message, placed as Kafka would place it."""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer, Message, Producer, TopicPartition

from adapter.app import SETTINGS
from adapter.protocol.offsets import encode
from tests.conftest import Client
from topology.naming import bucket_topic
from topology.placement import partition_for
from topology.wire import CONTROL_HEADER

PARTITIONS = 3  # make_settings' partitions per bucket topic


def _records(bootstrap: str, topic: str) -> list[tuple[int, int, bytes, bytes, dict[str, bytes]]]:
    """Every committed record of the topic: (partition, offset, key, value, headers)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"plain-{uuid.uuid4().hex}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    found = []
    at_end: set[int] = set()
    try:
        while len(at_end) < PARTITIONS:
            message = consumer.poll(10)
            assert message is not None, "the topic was not read to its end"
            error = message.error()
            if error is not None:
                at_end.add(message.partition() or 0)
                continue
            key, value = _bytes(message.key()), _bytes(message.value())
            found.append(
                (message.partition() or 0, message.offset() or 0, key, value, _headers(message))
            )
    finally:
        consumer.close()
    return found


def _bytes(value: str | bytes | None) -> bytes:
    return value.encode() if isinstance(value, str) else value or b""


def _headers(message: Message) -> dict[str, bytes]:
    raw = message.headers() or []
    pairs = list(raw.items()) if isinstance(raw, dict) else raw
    return {name: _bytes(value) for name, value in pairs}


async def test_each_message_is_one_plain_record(
    client: Client, kafka_bootstrap: str, unique: str
) -> None:
    bucket = f"plain-{unique}"
    assert (await client.put(f"/{bucket}")).status == 201
    text = {"Content-Type": "text/plain"}
    assert (await client.put(f"/{bucket}/notes", data=b"one", headers=text)).status == 201
    assert (await client.post(f"/{bucket}/notes", data=b"two", headers=text)).status == 204
    json_ct = {"Content-Type": "application/json"}
    response = await client.put(f"/{bucket}/events", data=b'[{"a":1}, [2,3]]', headers=json_ct)
    assert response.status == 201
    closing = {**text, "Stream-Closed": "true"}
    assert (await client.post(f"/{bucket}/notes", data=b"three", headers=closing)).status == 204

    topic = bucket_topic(client.app[SETTINGS].topic_prefix, bucket)
    records = _records(kafka_bootstrap, topic)
    data = [(p, k, v, h) for p, _, k, v, h in records if CONTROL_HEADER not in h]
    control = [(k, h[CONTROL_HEADER]) for _, _, k, _, h in records if CONTROL_HEADER in h]

    notes = [v for _, k, v, _ in data if k == b"notes"]
    events = [v for _, k, v, _ in data if k == b"events"]
    assert notes == [b"one", b"two", b"three"]
    assert events == [b'{"a":1}', b"[2,3]"]
    assert all(h["content-type"] in (b"text/plain", b"application/json") for *_, h in data)
    assert sorted(control) == [(b"events", b"create"), (b"notes", b"close"), (b"notes", b"create")]
    for partition, key, _, _ in data:
        assert partition == partition_for(key, PARTITIONS)

    # A plain Kafka producer keyed by stream id, with Kafka's (Java) default partitioner,
    # lands in the very partition the adapter chose.
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "partitioner": "murmur2_random"})
    landed: list[int] = []
    producer.produce(
        topic, b"x", key=b"notes", on_delivery=lambda _e, m: landed.append(m.partition() or 0)
    )
    producer.flush(10)
    assert landed == [partition_for(b"notes", PARTITIONS)]


async def test_offsets_are_kafka_positions(client: Client, unique: str) -> None:
    bucket = f"offsets-{unique}"
    assert (await client.put(f"/{bucket}")).status == 201
    created = await client.put(f"/{bucket}/s", data=b"a", headers={"Content-Type": "text/plain"})
    first_tail = created.headers["Stream-Next-Offset"]
    appended = await client.post(f"/{bucket}/s", data=b"b", headers={"Content-Type": "text/plain"})
    second_tail = appended.headers["Stream-Next-Offset"]
    assert first_tail < second_tail  # strictly increasing, lexicographically
    # Create record at 0, data at 1, commit marker at 2; the append's data at 3.
    assert (first_tail, second_tail) == (encode(2), encode(4))
    tail_read = await client.get(f"/{bucket}/s", params={"offset": first_tail})
    assert await tail_read.read() == b"b"
    assert tail_read.headers["Stream-Next-Offset"] == second_tail
