"""The group probe sees its coordinator's outage: the measure `kafka_unavailable` joins."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from devstack import cluster
from tests.faults.kafka_probe import GroupProbe, group_probe

pytestmark = pytest.mark.faults

SESSION_MS = 6000
PAUSED_S = 8.0  # past the session: the coordinator ends it when it runs again


def _commits_ok(probe: GroupProbe, count: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while sum(c.ok for c in probe.commits) < count:
        assert time.monotonic() < deadline, f"{count} commits not done: {probe.commits[-3:]}"
        time.sleep(0.1)


@pytest.mark.timeout(180)
def test_the_group_probe_is_out_while_its_coordinator_is(cluster_home: Path) -> None:
    layout = cluster.layout(cluster_home / "cluster")
    topic = f"probe-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": layout.bootstrap_servers, "log_level": 0})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    probe = group_probe(layout.bootstrap_servers, topic, f"{topic}.owners", SESSION_MS)
    probe.start()
    try:
        _commits_ok(probe, 3, 60)  # __consumer_offsets exists from the group's first commit
        node = cluster.partition_leader(
            layout.bootstrap_servers,
            "__consumer_offsets",
            cluster.transaction_state_partition(probe.group),
        )
        cluster.pause_node(layout, node)
        try:
            time.sleep(PAUSED_S)
        finally:
            cluster.resume_node(layout, node)
        before = sum(c.ok for c in probe.commits)
        _commits_ok(probe, before + 1, 90)  # back in the group and committing
    finally:
        probe.stop()
    assert probe.longest_unavailable() >= PAUSED_S
