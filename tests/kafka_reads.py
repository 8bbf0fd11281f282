"""Reading a test topic back as any Kafka consumer would: committed records only."""

from __future__ import annotations

from collections.abc import Iterator

from confluent_kafka import Consumer, Message, TopicPartition


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
