"""A single-node Apache Kafka 4.3.1 broker in KRaft combined mode, run from its Maven jars."""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AdminClient

from devstack import maven
from devstack.paths import cache_dir
from devstack.process import ServiceError, ServiceProcess, port_open, run_checked

KAFKA_VERSION = "4.3.1"
POM = Path(__file__).resolve().parent / "kafka" / "pom.xml"
START_TIMEOUT_S = 90.0
# Partitions of __transaction_state (and __consumer_offsets): which one holds a transactional
# id, and so which broker coordinates it, follows from this count.
TRANSACTION_STATE_PARTITIONS = 10

LOG4J2 = """\
status = warn
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.console.ref = console
logger.kafka.name = kafka
logger.kafka.level = warn
logger.started.name = kafka.server.KafkaRaftServer
logger.started.level = info
"""


@dataclass(frozen=True)
class KafkaNode:
    """Where one broker keeps its data and which loopback ports it listens on."""

    home: Path
    port: int = 9092
    controller_port: int = 9093
    heap: str = "512m"
    node_id: int = 1
    # A multi-node quorum: `id@host:port,...` of every voter, and the replicas of the internal
    # topics. Empty: this node is the only voter and every internal topic has one replica.
    voters: str = ""
    replicas: int = 1

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def process(self) -> ServiceProcess:
        return ServiceProcess("kafka", self.home)


def jars_dir() -> Path:
    """The broker's runtime classpath, fetched once with Maven and cached under the home."""
    target = cache_dir() / f"kafka-{KAFKA_VERSION}" / "libs"
    return maven.copy_dependencies(POM, target, "the Kafka broker's jars")


def server_properties(node: KafkaNode) -> str:
    """Combined broker+controller settings; on one node, transactions and compacted topics work
    with one replica, on three the internal topics get 3 replicas and need 2 in sync."""
    voters = node.voters or f"{node.node_id}@127.0.0.1:{node.controller_port}"
    min_isr = min(2, node.replicas)
    return "\n".join(
        [
            "process.roles=broker,controller",
            f"node.id={node.node_id}",
            f"controller.quorum.voters={voters}",
            f"listeners=PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{node.port}",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name=PLAINTEXT",
            "controller.listener.names=CONTROLLER",
            f"log.dirs={node.home / 'logs'}",
            "num.partitions=1",
            "auto.create.topics.enable=false",
            f"offsets.topic.replication.factor={node.replicas}",
            f"offsets.topic.num.partitions={TRANSACTION_STATE_PARTITIONS}",
            f"transaction.state.log.replication.factor={node.replicas}",
            f"transaction.state.log.min.isr={min_isr}",
            f"transaction.state.log.num.partitions={TRANSACTION_STATE_PARTITIONS}",
            f"share.coordinator.state.topic.replication.factor={node.replicas}",
            f"share.coordinator.state.topic.min.isr={min_isr}",
            # The default of topics created without one (__consumer_offsets among them).
            f"min.insync.replicas={min_isr}",
            "group.initial.rebalance.delay.ms=0",
            "",
        ]
    )


def java_argv(node: KafkaNode, main: str, *args: str) -> list[str]:
    classpath = str(jars_dir() / "*")  # a literal wildcard for the JVM, never for a shell
    return [
        "java", f"-Xms{node.heap}", f"-Xmx{node.heap}",
        f"-Dlog4j2.configurationFile={node.home / 'log4j2.properties'}",
        "-cp", classpath, main, *args,
    ]  # fmt: skip


def new_cluster_id() -> str:
    """22 characters of url-safe base64 of a random UUID, never starting with '-'.

    The storage tool would read an id starting with '-' as an option (about 1 in 64 ids);
    Kafka's own `Uuid.randomUuid` draws again in that case, and so do we.
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def _format_storage(node: KafkaNode, cluster_id: str | None = None) -> None:
    """Write the config and format the log directory once; later starts reuse both.

    The nodes of one cluster are formatted with the same `cluster_id`."""
    node.home.mkdir(parents=True, exist_ok=True)
    config = node.home / "server.properties"
    config.write_text(server_properties(node))
    (node.home / "log4j2.properties").write_text(LOG4J2)
    if (node.home / "logs" / "meta.properties").exists():
        return
    cluster_id = cluster_id or new_cluster_id()
    run_checked(
        java_argv(
            node, "kafka.tools.StorageTool", "format", "-g", "-t", cluster_id, "-c", str(config)
        ),
        "formatting Kafka storage",
    )


def answers_metadata(bootstrap_servers: str, timeout_s: float = 2.0) -> bool:
    """True when a broker at the address answers a metadata request."""
    host, _, port = bootstrap_servers.split(",")[0].rpartition(":")
    if not port_open(host, int(port)):
        return False
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 0})
    try:
        metadata = admin.list_topics(timeout=timeout_s)
    except Exception:  # noqa: BLE001 - any failure here only means "not yet"
        return False
    return bool(metadata.brokers)


def start(node: KafkaNode) -> str:
    """Start the broker unless one already answers there; return its bootstrap servers."""
    if answers_metadata(node.bootstrap_servers):
        return node.bootstrap_servers
    spawn(node)
    node.process.wait_ready(lambda: answers_metadata(node.bootstrap_servers), START_TIMEOUT_S)
    return node.bootstrap_servers


def spawn(node: KafkaNode, cluster_id: str | None = None) -> None:
    """Start the broker's process unless it runs already; do not wait for it to answer."""
    if node.process.pid() is not None:
        return
    if port_open("127.0.0.1", node.port) or port_open("127.0.0.1", node.controller_port):
        raise ServiceError(f"ports {node.port}/{node.controller_port} are taken by another process")
    _format_storage(node, cluster_id)
    node.process.spawn(java_argv(node, "kafka.Kafka", str(node.home / "server.properties")))


def stop(node: KafkaNode, timeout_s: float = 60.0) -> None:
    """SIGTERM (a clean shutdown), SIGKILL past `timeout_s` (0: at once)."""
    node.process.stop(timeout_s)
