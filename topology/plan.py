"""The topics the server needs, rendered for a platform team: `kafka-topics.sh` commands or
Strimzi `KafkaTopic` resources, from the very specs the server creates in `auto` mode."""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Iterable

from topology.specs import TopicLayout, TopicSpec, bucket_topic_spec, internal_specs

STRIMZI_API_VERSION = "kafka.strimzi.io/v1beta2"
STRIMZI_CLUSTER_LABEL = "strimzi.io/cluster"
# A Kubernetes object's name is an RFC 1123 subdomain: dot-separated labels of [a-z0-9-],
# each starting and ending alphanumeric. Topic names also allow upper case, '_' and '..', so
# a resource is named after its topic only when the name fits.
_K8S_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_NOT_IN_K8S_LABEL = re.compile(r"[^a-z0-9]+")
K8S_NAME_MAX = 253


def required_topics(layout: TopicLayout, buckets: Iterable[str] = ()) -> list[TopicSpec]:
    """The internal topics, then the data topic of each bucket named."""
    return [*internal_specs(layout), *(bucket_topic_spec(layout, b) for b in buckets)]


def kafka_topics_command(spec: TopicSpec, bootstrap_servers: str) -> str:
    """The `kafka-topics.sh` command that creates the topic as the server would."""
    words = [
        "kafka-topics.sh",
        "--bootstrap-server",
        bootstrap_servers,
        "--create",
        "--topic",
        spec.name,
        "--partitions",
        str(spec.partitions),
        "--replication-factor",
        str(spec.replication_factor),
    ]
    for key, value in spec.configs.items():
        words += ["--config", f"{key}={value}"]
    return shlex.join(words)


def kafka_topics_script(specs: Iterable[TopicSpec], bootstrap_servers: str) -> str:
    return "".join(kafka_topics_command(spec, bootstrap_servers) + "\n" for spec in specs)


def strimzi_topics(specs: Iterable[TopicSpec], cluster: str) -> str:
    """One YAML document per topic (strings JSON-quoted, which YAML reads as they are)."""
    return "".join(_strimzi_topic(spec, cluster) for spec in specs)


def _strimzi_topic(spec: TopicSpec, cluster: str) -> str:
    lines = [
        "---",
        f"apiVersion: {STRIMZI_API_VERSION}",
        "kind: KafkaTopic",
        "metadata:",
        f"  name: {json.dumps(resource_name(spec.name))}",
        "  labels:",
        f"    {STRIMZI_CLUSTER_LABEL}: {json.dumps(cluster)}",
        "spec:",
        f"  topicName: {json.dumps(spec.name)}",
        f"  partitions: {spec.partitions}",
        f"  replicas: {spec.replication_factor}",
        "  config:",
        *(f"    {key}: {json.dumps(value)}" for key, value in spec.configs.items()),
    ]
    return "\n".join(lines) + "\n"


def resource_name(topic: str) -> str:
    """A Kubernetes name for the topic's resource: the topic name when it is one, else a
    lower-cased form with a short hash of the name (so two topics never share a resource)."""
    if len(topic) <= K8S_NAME_MAX and all(_K8S_LABEL.match(p) for p in topic.split(".")):
        return topic
    digest = hashlib.sha256(topic.encode()).hexdigest()[:8]
    base = _NOT_IN_K8S_LABEL.sub("-", topic.lower()).strip("-")[:200]
    return f"{base}-{digest}" if base else digest
