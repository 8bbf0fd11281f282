"""The broker the tests run against is a real Kafka: compaction, transactions, read_committed."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from devstack import kafka
from devstack.process import free_port
from tests.kafka_reads import topic_configs


def _consume_all(bootstrap: str, topic: str, expected_end: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        for _ in range(60):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value() or b"")
            positions = consumer.position(consumer.assignment())
            if positions and positions[0].offset >= expected_end:
                break
    finally:
        consumer.close()
    return values


def _high_watermark_reaching(bootstrap: str, topic: str, wanted: int) -> int:
    """The partition's high watermark once it is `wanted`, or the last one seen after 30 s."""
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": f"wm-{uuid.uuid4().hex}"})
    try:
        deadline = time.monotonic() + 30
        while True:
            _, high = probe.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
            if high >= wanted or time.monotonic() > deadline:
                return int(high)
            time.sleep(0.1)
    finally:
        probe.close()


def test_compacted_topic_and_transactions(kafka_bootstrap: str, unique: str) -> None:
    topic = f"broker-check-{unique}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    new = NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})
    admin.create_topics([new])[topic].result(timeout=30)
    assert topic_configs(kafka_bootstrap, topic)["cleanup.policy"] == "compact"

    producer = Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": f"tx-{unique}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, key=b"k1", value=b"committed")
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, key=b"k2", value=b"aborted")
    producer.flush(30)
    producer.abort_transaction(30)

    # Two data records and two transaction markers. The coordinator answers the end of a
    # transaction before it writes the markers into the partition, so the high watermark
    # reaches 4 a moment after `abort_transaction` returns: wait for it, then read.
    assert _high_watermark_reaching(kafka_bootstrap, topic, 4) == 4
    assert _consume_all(kafka_bootstrap, topic, 4) == [b"committed"]


def test_start_is_idempotent(kafka_bootstrap: str, tmp_path: Path) -> None:
    """A broker already answering at the address is reused, never started twice."""
    port = int(kafka_bootstrap.rpartition(":")[2])
    node = kafka.KafkaNode(home=tmp_path / "second", port=port, controller_port=free_port())
    assert kafka.start(node) == f"127.0.0.1:{port}"
    assert node.process.pid() is None
    assert not node.home.exists()
