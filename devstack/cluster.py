"""Three Kafka 4.3.1 brokers in KRaft combined mode (a 3-voter quorum), and the faults tests
inflict on them: stop, kill -9, pause (SIGSTOP) and resume, restart one node.

Each node has its own loopback ports and data folder under the cluster's home; the ports are
remembered in `cluster.json` there, so a later call (another process, `make cluster-down`)
finds the same nodes. Internal topics get 3 replicas and need 2 in sync.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AdminClient

from devstack import kafka
from devstack.process import ServiceError, free_port

NODES = 3
HEAP = "384m"
LAYOUT = "cluster.json"
# Durability settings our topics should get on this cluster (DURABLE_KAFKA_*).
TOPIC_ENV = {
    "DURABLE_KAFKA_REPLICATION_FACTOR": "3",
    "DURABLE_KAFKA_MIN_INSYNC_REPLICAS": "2",
}


@dataclass(frozen=True)
class KafkaCluster:
    """Three combined nodes, ids 1..3, under `home/node-{id}`."""

    home: Path
    nodes: tuple[kafka.KafkaNode, ...]
    cluster_id: str

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(node.bootstrap_servers for node in self.nodes)

    def node(self, node_id: int) -> kafka.KafkaNode:
        return next(node for node in self.nodes if node.node_id == node_id)


def layout(home: Path, ports: list[tuple[int, int]] | None = None) -> KafkaCluster:
    """The cluster kept under `home`: its remembered ports, else `ports`, else free ones."""
    saved = home / LAYOUT
    if saved.exists():
        spec = json.loads(saved.read_text())
        ports, cluster_id = [tuple(pair) for pair in spec["ports"]], spec["cluster_id"]
    else:
        ports = ports or [(free_port(), free_port()) for _ in range(NODES)]
        cluster_id = kafka.new_cluster_id()
        home.mkdir(parents=True, exist_ok=True)
        saved.write_text(json.dumps({"ports": ports, "cluster_id": cluster_id}))
    voters = ",".join(f"{i}@127.0.0.1:{ctrl}" for i, (_, ctrl) in enumerate(ports, 1))
    nodes = tuple(
        kafka.KafkaNode(
            home=home / f"node-{i}",
            port=port,
            controller_port=ctrl,
            heap=HEAP,
            node_id=i,
            voters=voters,
            replicas=NODES,
        )
        for i, (port, ctrl) in enumerate(ports, 1)
    )
    return KafkaCluster(home, nodes, cluster_id)


def start_cluster(home: Path, ports: list[tuple[int, int]] | None = None) -> str:
    """Start every node not running (all at once: a quorum needs two), wait until the cluster
    has three brokers; return the bootstrap servers."""
    cluster = layout(home, ports)
    for node in cluster.nodes:
        kafka.spawn(node, cluster.cluster_id)
    everyone = set(range(1, NODES + 1))
    _wait(cluster, lambda: live_brokers(cluster.bootstrap_servers) == everyone, RESTART_TIMEOUT_S)
    return cluster.bootstrap_servers


def stop_cluster(home: Path, timeout_s: float = 60.0) -> None:
    cluster = layout(home)
    for node in cluster.nodes:
        resume_node(cluster, node.node_id)  # a stopped process cannot act on SIGTERM
    for node in cluster.nodes:
        kafka.stop(node, timeout_s)


def is_up(home: Path) -> bool:
    """Whether a cluster was laid out under `home` and all its brokers answer."""
    if not (home / LAYOUT).exists():
        return False
    return len(live_brokers(layout(home).bootstrap_servers)) == NODES


def live_brokers(bootstrap_servers: str, timeout_s: float = 3.0) -> set[int]:
    """The ids of the brokers the cluster's metadata lists (registered and not fenced)."""
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 0})
    try:
        return set(admin.list_topics(timeout=timeout_s).brokers)
    except Exception:  # noqa: BLE001 - any failure here only means "none answer yet"
        return set()


def stop_node(cluster: KafkaCluster, node_id: int) -> None:
    """SIGTERM: a controlled shutdown (leadership moved away first)."""
    resume_node(cluster, node_id)
    kafka.stop(cluster.node(node_id))


def kill_node(cluster: KafkaCluster, node_id: int) -> None:
    """SIGKILL: the node dies at once, mid-write."""
    _signal(cluster, node_id, signal.SIGKILL)
    pid_file = cluster.node(node_id).process.pid_file
    deadline = time.monotonic() + 30
    while cluster.node(node_id).process.pid() is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    pid_file.unlink(missing_ok=True)


def pause_node(cluster: KafkaCluster, node_id: int) -> None:
    """SIGSTOP: the node keeps its sockets open but answers nothing (a stalled JVM)."""
    _signal(cluster, node_id, signal.SIGSTOP)


def resume_node(cluster: KafkaCluster, node_id: int) -> None:
    _signal(cluster, node_id, signal.SIGCONT)


# A restarted broker first recovers the log of every partition it holds; after a long fault
# run on a loaded machine (seed 404 of `make faults` at load average 30) that took over 90 s.
RESTART_TIMEOUT_S = 240.0
# While waiting for the cluster, every node should run: one that died (a KRaft broker can die
# at start on a loaded machine, "fatal error while waiting for the controller to acknowledge
# that we are caught up") is started again, this many times at most per wait.
MAX_RESPAWNS = 3


def restart_node(cluster: KafkaCluster, node_id: int) -> None:
    """Start a stopped or killed node again; return once the cluster lists it as a broker."""
    kafka.spawn(cluster.node(node_id), cluster.cluster_id)
    _wait(
        cluster,
        lambda: node_id in live_brokers(cluster.node(node_id).bootstrap_servers),
        RESTART_TIMEOUT_S,
    )


def partition_leader(bootstrap_servers: str, topic: str, partition: int) -> int:
    """The node id leading `topic`'s partition, as the cluster's metadata says now."""
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 0})
    found = admin.list_topics(topic, timeout=10).topics.get(topic)
    leader = found.partitions[partition].leader if found and partition in found.partitions else -1
    if leader < 0:
        raise ServiceError(f"{topic}-{partition} has no leader")
    return int(leader)


def transaction_coordinator(bootstrap_servers: str, transactional_id: str) -> int:
    """The node coordinating `transactional_id`: the leader of its __transaction_state
    partition (`transaction_state_partition`)."""
    partition = transaction_state_partition(transactional_id)
    return partition_leader(bootstrap_servers, "__transaction_state", partition)


def transaction_state_partition(transactional_id: str) -> int:
    """`abs(javaHashCode(id)) % partitions`, as the broker computes it."""
    return _java_abs(_java_hash(transactional_id)) % kafka.TRANSACTION_STATE_PARTITIONS


def _java_hash(text: str) -> int:
    """Java's `String.hashCode` (over UTF-16 code units, 32-bit wrap-around)."""
    value = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        value = (31 * value + int.from_bytes(units[i : i + 2], "big")) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _java_abs(value: int) -> int:
    """Kafka's `Utils.abs`: Integer.MIN_VALUE maps to 0."""
    return 0 if value == -(1 << 31) else abs(value)


def _signal(cluster: KafkaCluster, node_id: int, sig: signal.Signals) -> None:
    pid = cluster.node(node_id).process.pid()
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, sig)


def _wait(
    cluster: KafkaCluster, ready: Callable[[], bool], timeout_s: float = kafka.START_TIMEOUT_S
) -> None:
    deadline = time.monotonic() + timeout_s
    respawns = 0
    while time.monotonic() < deadline:
        if ready():
            return
        for node in cluster.nodes:  # a node that died starting (seen at load average 50+)
            if node.process.pid() is None and respawns < MAX_RESPAWNS:
                respawns += 1
                print(f"kafka node {node.node_id} died while starting; starting it again")
                kafka.spawn(node, cluster.cluster_id)
        time.sleep(0.5)
    tails = "\n".join(f"node {n.node_id}:\n{n.process.log_tail(15)}" for n in cluster.nodes)
    raise ServiceError(f"the cluster was not ready after {timeout_s:.0f}s:\n{tails}")
