"""The topics plan: kafka-topics.sh commands and Strimzi KafkaTopic YAML from the same specs."""

from __future__ import annotations

import shlex
from typing import Any

import yaml

from topology.plan import (
    STRIMZI_API_VERSION,
    kafka_topics_command,
    kafka_topics_script,
    required_topics,
    resource_name,
    strimzi_topics,
)
from topology.specs import TopicLayout, bucket_topic_spec, internal_specs

LAYOUT = TopicLayout(
    prefix="acme.dk.",
    partitions=6,
    replication_factor=3,
    min_insync_replicas=2,
    max_message_bytes=1 << 20,
    write_slots=4,
)
INTERNAL = [
    "acme.dk.internal.meta",
    "acme.dk.internal.producers",
    "acme.dk.internal.snapshots",
    "acme.dk.internal.tier",
    "acme.dk.internal.owners",
    "acme.dk.internal.slots",
]


def test_the_plan_is_the_internal_topics_then_each_bucket() -> None:
    specs = required_topics(LAYOUT, ["orders", "_default"])
    assert [s.name for s in specs] == [
        *INTERNAL,
        "acme.dk.bucket.orders",
        "acme.dk.bucket._default",
    ]
    assert specs[:6] == internal_specs(LAYOUT)
    assert specs[6] == bucket_topic_spec(LAYOUT, "orders")


def _parsed(command: str) -> dict[str, Any]:
    """A kafka-topics.sh --create command's topic, partitions, replicas and configs."""
    words = shlex.split(command)
    assert words[:4] == ["kafka-topics.sh", "--bootstrap-server", "k1:9093,k2:9093", "--create"]
    options: dict[str, Any] = {"config": {}}
    for flag, value in zip(words[4::2], words[5::2], strict=True):
        if flag == "--config":
            key, _, setting = value.partition("=")
            options["config"][key] = setting
        else:
            options[flag.removeprefix("--")] = value
    return options


def test_a_command_creates_the_topic_as_the_server_would() -> None:
    spec = bucket_topic_spec(LAYOUT, "orders")
    parsed = _parsed(kafka_topics_command(spec, "k1:9093,k2:9093"))
    assert parsed["topic"] == "acme.dk.bucket.orders"
    assert (parsed["partitions"], parsed["replication-factor"]) == ("6", "3")
    assert parsed["config"] == spec.configs
    assert parsed["config"]["retention.ms"] == "-1"
    assert parsed["config"]["min.insync.replicas"] == "2"


def test_the_script_has_one_command_per_topic_and_the_meta_topic_compacted() -> None:
    script = kafka_topics_script(required_topics(LAYOUT, ["orders"]), "k1:9093,k2:9093")
    commands = [_parsed(line) for line in script.splitlines()]
    assert [c["topic"] for c in commands] == [*INTERNAL, "acme.dk.bucket.orders"]
    meta = commands[0]
    assert meta["config"]["cleanup.policy"] == "compact"
    assert meta["partitions"] == "1"
    assert commands[5]["partitions"] == "4"  # slots: one per write slot


def test_strimzi_resources_carry_the_same_specs() -> None:
    specs = required_topics(LAYOUT, ["orders"])
    documents = [d for d in yaml.safe_load_all(strimzi_topics(specs, "prod-kafka")) if d]
    assert len(documents) == len(specs)
    for document, spec in zip(documents, specs, strict=True):
        assert document["apiVersion"] == STRIMZI_API_VERSION == "kafka.strimzi.io/v1beta2"
        assert document["kind"] == "KafkaTopic"
        assert document["metadata"]["labels"] == {"strimzi.io/cluster": "prod-kafka"}
        assert document["metadata"]["name"] == spec.name  # already a valid Kubernetes name
        assert document["spec"]["topicName"] == spec.name
        assert document["spec"]["partitions"] == spec.partitions
        assert document["spec"]["replicas"] == spec.replication_factor
        assert document["spec"]["config"] == spec.configs  # values stay strings


def test_a_topic_name_kubernetes_refuses_gets_a_distinct_valid_name() -> None:
    assert resource_name("acme.dk.bucket.orders") == "acme.dk.bucket.orders"
    upper, underscore = resource_name("Acme.bucket.x"), resource_name("acme.bucket._default")
    for name in (upper, underscore, resource_name("a..b")):
        assert name == name.lower()
        assert all(
            label and label[0].isalnum() and label[-1].isalnum() for label in name.split(".")
        )
    assert resource_name("acme.bucket._default") != resource_name("acme.bucket.-default")
    assert underscore.startswith("acme-bucket-default-")
