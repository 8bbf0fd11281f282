"""The chart's Strimzi examples agree with the server: the KafkaUsers grant exactly the
documented ACLs under the secured values' prefix, their credentials are the ones the server's
client.properties uses, and the KafkaTopics are the topics `topology` would create.

Kubernetes' schemas have no Strimzi resources, so these are checked field by field."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from adapter.acl_plan import print_acls
from adapter.config import Settings, TopicManagementMode
from tests.deployment import Acl, documented_acls
from topology.naming import bucket_of_topic
from topology.specs import (
    TopicLayout,
    TopicSpec,
    bucket_topic_spec,
    internal_topic_specs,
    slots_topic_spec,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "durable-kafka" / "examples"
STRIMZI = EXAMPLES / "strimzi"
STRIMZI_API = "kafka.strimzi.io/v1beta2"
# kafka-acls.sh's words for Strimzi's resource types and pattern types.
RESOURCE_TYPES = {
    "topic": "topic",
    "group": "group",
    "transactionalId": "transactional-id",
    "cluster": "cluster",
}
PATTERN_TYPES = {"prefix": "prefixed", "literal": "literal"}


def documents(name: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((STRIMZI / name).read_text()) if doc]


def document(name: str) -> dict[str, Any]:
    [found] = documents(name)
    return found


def secured_values() -> dict[str, Any]:
    values: dict[str, Any] = yaml.safe_load((EXAMPLES / "values-secured.yaml").read_text())
    return values


def granted(user: dict[str, Any]) -> set[Acl]:
    acls = set()
    for rule in user["spec"]["authorization"]["acls"]:
        resource = rule["resource"]
        acls.add(
            Acl(
                RESOURCE_TYPES[resource["type"]],
                resource.get("name", ""),
                PATTERN_TYPES[resource.get("patternType", "literal")],
                frozenset(rule["operations"]),
            )
        )
    assert len(acls) == len(user["spec"]["authorization"]["acls"]), "a rule is listed twice"
    return acls


def client_properties() -> dict[str, str]:
    secret = document("credentials-secret.yaml")
    text = secret["stringData"][secured_values()["kafka"]["clientProperties"]["key"]]
    return dict(line.split("=", 1) for line in text.splitlines() if line.strip())


@pytest.mark.parametrize(
    ("example", "topic_management"),
    [("kafkauser.yaml", None), ("kafkauser-auto.yaml", "auto")],
)
def test_kafka_user_grants_exactly_the_documented_acls(
    example: str, topic_management: str | None
) -> None:
    """kafkauser.yaml is the secured values' user (their topic management); the other, auto's."""
    kafka = secured_values()["kafka"]
    user = document(example)
    assert (user["apiVersion"], user["kind"]) == (STRIMZI_API, "KafkaUser")
    assert user["spec"]["authorization"]["type"] == "simple"
    mode = topic_management or kafka["topicManagement"]
    assert granted(user) == documented_acls(kafka["topicPrefix"], mode)


def test_external_user_may_not_create_or_delete_topics() -> None:
    topics = [acl for acl in granted(document("kafkauser.yaml")) if acl.resource == "topic"]
    assert secured_values()["kafka"]["topicManagement"] == "external"
    # Delete stays on bucket topics alone: DeleteRecords, with which the tier frees Kafka, is
    # authorized as Delete.
    assert all(not acl.operations & {"Create", "Alter", "AlterConfigs"} for acl in topics)
    deleting = [acl for acl in topics if "Delete" in acl.operations]
    assert [(acl.name, acl.operations) for acl in deleting] == [
        ("acme.dk.bucket.", frozenset({"Delete"}))
    ]


@pytest.mark.parametrize("example", ["kafkauser.yaml", "kafkauser-auto.yaml"])
def test_kafka_user_password_is_the_servers(example: str) -> None:
    user = document(example)
    secret = document("credentials-secret.yaml")
    assert user["spec"]["authentication"]["type"] == "scram-sha-512"
    reference = user["spec"]["authentication"]["password"]["valueFrom"]["secretKeyRef"]
    assert reference["name"] == secret["metadata"]["name"]
    properties = client_properties()
    assert properties["sasl.mechanism"] == "SCRAM-SHA-512"
    assert properties["security.protocol"] == "SASL_SSL"
    assert properties["sasl.username"] == user["metadata"]["name"]
    assert properties["sasl.password"] == secret["stringData"][reference["key"]]


def test_examples_name_one_cluster_and_its_ca() -> None:
    """Strimzi's cluster CA Secret is `<cluster>-cluster-ca-cert`, holding `ca.crt`."""
    clusters = {
        doc["metadata"]["labels"]["strimzi.io/cluster"]
        for name in ("kafkauser.yaml", "kafkauser-auto.yaml", "kafkatopics.yaml")
        for doc in documents(name)
    }
    assert len(clusters) == 1
    [cluster] = clusters
    [mount] = secured_values()["kafka"]["secretMounts"]
    assert mount["secretName"] == f"{cluster}-cluster-ca-cert"
    assert client_properties()["ssl.ca.location"] == f"{mount['mountPath']}/ca.crt"
    host = secured_values()["kafka"]["bootstrapServers"].split(".")[0]
    assert host == f"{cluster}-kafka-bootstrap"


def secured_layout() -> TopicLayout:
    kafka = secured_values()["kafka"]
    return TopicLayout(
        prefix=kafka["topicPrefix"],
        partitions=kafka["partitions"],
        replication_factor=kafka["replicationFactor"],
        min_insync_replicas=kafka["minInsyncReplicas"],
        max_message_bytes=Settings().max_message_bytes,
        write_slots=kafka["writeSlots"],
    )


def as_spec(topic: dict[str, Any]) -> TopicSpec:
    spec = topic["spec"]
    configs = {key: str(value) for key, value in spec["config"].items()}
    return TopicSpec(spec["topicName"], spec["partitions"], spec["replicas"], configs)


def test_kafka_topics_are_the_topics_the_server_needs() -> None:
    layout = secured_layout()
    topics = documents("kafkatopics.yaml")
    assert all((t["apiVersion"], t["kind"]) == (STRIMZI_API, "KafkaTopic") for t in topics)
    specs = [as_spec(topic) for topic in topics]
    buckets = [b for b in (bucket_of_topic(layout.prefix, s.name) for s in specs) if b]
    assert buckets, "no example bucket topic"
    expected = [
        *internal_topic_specs(layout),
        slots_topic_spec(layout),
        *(bucket_topic_spec(layout, bucket) for bucket in buckets),
    ]
    assert specs == expected


@pytest.mark.parametrize(
    ("example", "topic_management"),
    [("kafkauser.yaml", None), ("kafkauser-auto.yaml", "auto")],
)
def test_kafka_user_is_what_acls_plan_prints(
    example: str, topic_management: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    """The committed KafkaUser is, byte for byte, `durable-kafka acls plan --format strimzi`
    under the secured values' settings: regenerate it rather than edit it."""
    kafka = secured_values()["kafka"]
    external = (topic_management or kafka["topicManagement"]) == "external"
    management: TopicManagementMode = "external" if external else "auto"
    settings = replace(Settings(), topic_prefix=kafka["topicPrefix"], topic_management=management)
    assert print_acls(settings, "strimzi", "durable-kafka", None) == 0
    assert capsys.readouterr().out == (STRIMZI / example).read_text()
