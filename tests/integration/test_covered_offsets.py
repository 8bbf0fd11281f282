"""Covered offsets kept as a never-joined group's committed offsets (`adapter/state/
covered_offsets.py`): read back for the bucket's incarnation only, never moved back by this
instance, and an unreachable Kafka costs a scan from the tails, not an error. On the real
broker."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from adapter.log.scanner import PartitionScanner
from adapter.state.covered_offsets import ROLE, Covered, CoveredOffsets
from topology.kafka_client import KafkaAccess

BORN, REBORN = 1_000, 2_000  # two incarnations of a bucket, by creation time


def _topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, 2, 1)]).values():
        future.result()


async def test_an_offset_is_read_back_for_its_bucket_incarnation_only(
    kafka_bootstrap: str, unique: str
) -> None:
    prefix, topic = f"c{unique}.", f"c{unique}.bucket.shop"
    _topic(kafka_bootstrap, topic)
    kafka = KafkaAccess(kafka_bootstrap, prefix)
    covered = CoveredOffsets(PartitionScanner(kafka, 10, ROLE))
    try:
        assert await covered.read({(topic, 0): BORN, (topic, 1): BORN}) == {}
        await covered.mark({(topic, 0): Covered(40, BORN), (topic, 1): Covered(7, REBORN)})
        await covered.mark({(topic, 0): Covered(12, BORN)})  # behind what it committed: kept
        found = await covered.read({(topic, 0): BORN, (topic, 1): BORN})
        assert found == {(topic, 0): 40}  # partition 1's is of another incarnation
    finally:
        await covered.close()
    again = CoveredOffsets(PartitionScanner(kafka, 10, ROLE))  # another instance
    try:
        assert await again.read({(topic, 1): REBORN}) == {(topic, 1): 7}
    finally:
        await again.close()


async def test_an_unreachable_kafka_leaves_no_offset_and_raises_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    nowhere = KafkaAccess("127.0.0.1:1", "x.", properties={"log_level": "0"})
    covered = CoveredOffsets(PartitionScanner(nowhere, 1, ROLE))
    try:
        await covered.mark({("x.bucket.b", 0): Covered(5, BORN)})
        assert await covered.read({("x.bucket.b", 0): BORN}) == {}
    finally:
        await covered.close()
    messages = [record.getMessage() for record in caplog.records]
    assert any(m.startswith("covered offsets not committed") for m in messages), messages
    assert any(m.startswith("covered offsets not read") for m in messages), messages
