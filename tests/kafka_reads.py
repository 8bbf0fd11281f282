"""Reading a test topic back as any Kafka consumer would: committed records only."""

from __future__ import annotations

import time
from collections.abc import Iterator

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType


def committed_values(bootstrap: str, topic: str) -> list[bytes]:
    """Every committed record value of partition 0 of `topic`, in order (read_committed)."""
    return [value for _offset, value in committed_records(bootstrap, topic)]


def committed_records(bootstrap: str, topic: str) -> list[tuple[int, bytes]]:
    """(offset, value) of every committed record of partition 0 of `topic`, in order."""
    return [(m.offset() or 0, m.value() or b"") for m in committed_messages(bootstrap, topic)]


def compacted_entries(bootstrap: str, topic: str) -> list[tuple[str, bytes | None]]:
    """(key, value) of partition 0 of `topic` as compaction could leave it: each key's last
    record only, in the order of those last records (tombstones kept, as within
    `delete.retention.ms`)."""
    last: dict[str, tuple[int, bytes | None]] = {}
    for message in committed_messages(bootstrap, topic):
        last[(message.key() or b"").decode()] = (message.offset() or 0, message.value())
    return [(key, value) for key, (_offset, value) in sorted(last.items(), key=lambda e: e[1][0])]


def committed_messages(bootstrap: str, topic: str, partition: int = 0) -> Iterator[Message]:
    """The committed records of one partition of `topic`, read by a fresh consumer."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "never-joined",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    try:
        while (message := consumer.poll(10)) is not None and message.error() is None:
            yield message
    finally:
        consumer.close()


def topic_configs(bootstrap: str, topic: str, timeout_s: float = 30.0) -> dict[str, str]:
    """Every config value of `topic` as the broker reports it. A topic just created may not
    yet be known to the broker that answers; it is asked again until it is, or `timeout_s`."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            configs = admin.describe_configs([resource])[resource].result(timeout_s)
        except KafkaException as error:
            unknown = error.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
            if not unknown or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
            continue
        return {name: str(entry.value) for name, entry in configs.items()}
