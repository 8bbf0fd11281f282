"""Reading a sparse key's listed records (`log/mount_reader.py`) fetches about one batch per
record, not the partition: counted in bytes received (librdkafka's statistics), not time."""

from __future__ import annotations

import json
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from adapter.log.mount_reader import SPARSE_FETCH_BYTES, KeyRead, _read
from adapter.log.reader import ReadLimits, sparse_fetch_config

RECORDS, EVERY, VALUE = 8000, 2000, 1024  # 8 MiB of others' records, a needle every 2 MiB


def _fill(bootstrap: str, topic: str) -> list[int]:
    """The offsets of the key's records, among small lz4 batches of other keys."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "batch.size": 16_384, "linger.ms": 5})
    for n in range(RECORDS):
        key = b"needle" if n % EVERY == EVERY // 2 else f"hay-{n}".encode()
        producer.produce(topic, bytes([n % 251]) * VALUE, key)
    assert producer.flush(60) == 0
    return [n for n in range(RECORDS) if n % EVERY == EVERY // 2]  # one partition: n = offset


def _received(consumer_config: dict[str, Any], request: KeyRead) -> tuple[int, int]:
    """(records of the key read, bytes the consumer received from the broker for it)."""
    stats: list[dict[str, Any]] = []
    consumer = Consumer(
        consumer_config
        | {"statistics.interval.ms": 100, "stats_cb": lambda raw: stats.append(json.loads(raw))}
    )
    try:
        result = _read(consumer, request, ReadLimits(1 << 20, 64 << 20, 10.0))
        seen = len(stats)
        for _ in range(100):  # statistics emitted after the read cover all of it
            consumer.poll(0.1)
            if len(stats) > seen + 1:
                break
        return len(result.messages), int(stats[-1]["rx_bytes"])
    finally:
        consumer.close()


def test_listed_records_are_fetched_a_batch_at_a_time(kafka_bootstrap: str, unique: str) -> None:
    topic = f"sparse-{unique}"
    needles = _fill(kafka_bootstrap, topic)
    request = KeyRead(topic, 0, b"needle", needles[0], needles[-1] + 1, tuple(needles))
    config = {
        "bootstrap.servers": kafka_bootstrap,
        "group.id": "never-joined",
        "enable.partition.eof": True,
        "isolation.level": "read_committed",
        "fetch.wait.max.ms": 10,
    }
    read, received = _received(config | sparse_fetch_config(SPARSE_FETCH_BYTES), request)
    assert read == len(needles)
    # Per record a fetch of at most 64 KiB (the batches are 16 KiB), and at most one more that
    # a drained queue starts before the seek; not the 6 MiB between them (the default
    # settings receive the whole topic here, 7 MB).
    assert received < len(needles) * 3 * SPARSE_FETCH_BYTES, received
