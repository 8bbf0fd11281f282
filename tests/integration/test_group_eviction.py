"""Removing a gone owner from the owners' group (`topology/group_eviction.py`), against a real
coordinator: the removal replaces the member and leaves in its name, and a consumer whose
instance id another took sees it as a fatal poll, which is how a peer removing the same owner
at the same moment learns that the other did it."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Message
from confluent_kafka.admin import AdminClient, NewTopic

from topology import group_eviction
from topology.kafka_client import KafkaAccess

pytestmark = pytest.mark.integration

URL = "http://127.0.0.1:9/"  # the gone owner's advertised address (its client.id)
SESSION_MS = 45_000  # far longer than the test: only the removal moves its partitions
WITHIN_S = 30.0


def _member(bootstrap: str, group: str, topic: str) -> Consumer:
    """A static member named URL, joined and holding every partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.instance.id": "m1",
            "client.id": URL,
            "session.timeout.ms": SESSION_MS,
            "partition.assignment.strategy": "cooperative-sticky",
        }
    )
    consumer.subscribe([topic])
    deadline = time.monotonic() + WITHIN_S
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.1)
    assert consumer.assignment()
    return consumer


def _first_polled(consumer: Consumer) -> Message | None:
    deadline = time.monotonic() + WITHIN_S
    while time.monotonic() < deadline:
        if (polled := consumer.poll(0.1)) is not None and polled.error() is not None:
            return polled
    return None


def test_a_member_whose_instance_id_is_taken_sees_it_fenced_and_a_gone_one_is_removed_once(
    kafka_bootstrap: str, unique: str
) -> None:
    topic, group = f"evict-{unique}", f"owners-{unique}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(WITHIN_S)
    first = _member(kafka_bootstrap, group, topic)
    try:
        # A second consumer joins with its instance id, as a second remover does: the first
        # is fenced, and its next poll says so.
        second = _member(kafka_bootstrap, group, topic)
        assert group_eviction._fenced(_first_polled(first))
        assert not group_eviction._fenced(None)
    finally:
        first.close()
    second.close()  # a static member: no LeaveGroup, so it stays a member, gone
    access = KafkaAccess(bootstrap_servers=kafka_bootstrap, prefix=f"{unique}.")
    assert group_eviction.evict(access, group, topic, URL, SESSION_MS, WITHIN_S) == ["m1"]
    # Nothing is left at the address: a later removal finds nobody to remove.
    assert group_eviction.evict(access, group, topic, URL, SESSION_MS, WITHIN_S) == []
