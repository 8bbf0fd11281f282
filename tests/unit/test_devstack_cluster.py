"""The 3-broker cluster's pure parts: its layout, each node's properties, coordinator lookup."""

from __future__ import annotations

from pathlib import Path

from devstack import cluster, kafka


def properties(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line)


def test_layout_is_remembered_with_one_cluster_id(tmp_path: Path) -> None:
    ports = [(1001, 1002), (1003, 1004), (1005, 1006)]
    first = cluster.layout(tmp_path, ports)
    again = cluster.layout(tmp_path)  # ports not given: the saved ones
    assert again == first
    assert first.bootstrap_servers == "127.0.0.1:1001,127.0.0.1:1003,127.0.0.1:1005"
    assert [node.home for node in first.nodes] == [tmp_path / f"node-{i}" for i in (1, 2, 3)]


def test_every_node_votes_and_replicates_internal_topics_three_times(tmp_path: Path) -> None:
    layout = cluster.layout(tmp_path, [(1001, 1002), (1003, 1004), (1005, 1006)])
    second = properties(kafka.server_properties(layout.node(2)))
    assert second["node.id"] == "2"
    assert second["controller.quorum.voters"] == (
        "1@127.0.0.1:1002,2@127.0.0.1:1004,3@127.0.0.1:1006"
    )
    assert second["listeners"] == "PLAINTEXT://127.0.0.1:1003,CONTROLLER://127.0.0.1:1004"
    assert second["offsets.topic.replication.factor"] == "3"
    assert second["transaction.state.log.replication.factor"] == "3"
    assert second["transaction.state.log.min.isr"] == "2"
    assert second["min.insync.replicas"] == "2"


def test_a_single_node_keeps_one_replica(tmp_path: Path) -> None:
    single = properties(kafka.server_properties(kafka.KafkaNode(home=tmp_path)))
    assert single["controller.quorum.voters"] == "1@127.0.0.1:9093"
    assert single["transaction.state.log.replication.factor"] == "1"
    assert single["transaction.state.log.min.isr"] == "1"


def test_java_string_hash_matches_the_jvm() -> None:
    # Values of "".hashCode(), "abc".hashCode() and a wrap-around, as the JVM computes them.
    assert cluster._java_hash("") == 0
    assert cluster._java_hash("abc") == 96354
    assert cluster._java_hash("polygenelubricants") == -(2**31)
    assert cluster._java_abs(-(2**31)) == 0
