"""What the deployment files (compose, the Helm chart, the Strimzi examples) must agree with:
the server's setting names, and the Kafka ACL set docs/operations.md documents."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from adapter.config import env_name, setting_names
from topology.acls import (
    CLUSTER,
    GROUP,
    TOPIC,
    TRANSACTIONAL_ID,
    Grant,
    instance_grants,
    mount_grants,
)


def known_variables() -> set[str]:
    """Every DURABLE_KAFKA_* variable the server reads."""
    return {env_name(name) for name in setting_names()}


@dataclass(frozen=True)
class Acl:
    """One allow rule for the server's principal, in kafka-acls.sh's words."""

    resource: str  # topic, group, transactional-id, cluster
    name: str  # "" for the cluster
    pattern: str  # prefixed, literal
    operations: frozenset[str]


def documented_acls(prefix: str, topic_management: str) -> set[Acl]:
    """The ACLs the server needs under `prefix`, as `topology/acls.py` states them (the set the
    integration tier verifies against a broker that denies everything else)."""
    kinds = {
        TOPIC: "topic",
        GROUP: "group",
        TRANSACTIONAL_ID: "transactional-id",
        CLUSTER: "cluster",
    }
    return {
        Acl(
            kinds[grant.resource],
            "" if grant.resource == CLUSTER else grant.name,
            "prefixed" if grant.prefixed else "literal",
            frozenset(grant.operations),
        )
        for grant in instance_grants(prefix, manage_topics=topic_management == "auto")
    }


def mounted_topic_acl(topic: str) -> Acl:
    """All a mounted existing topic needs (read only)."""
    (grant,) = mount_grants(topic)
    return Acl("topic", topic, "literal", frozenset(grant.operations))


def planned_grants(script: str) -> dict[str, list[Grant]]:
    """The grants of each principal in `kafka-acls.sh --add` commands (`acls plan`'s output),
    read back from the commands' own words."""
    kinds = {"--topic": TOPIC, "--group": GROUP, "--transactional-id": TRANSACTIONAL_ID}
    found: dict[str, list[Grant]] = {}
    commands = script.replace("\\\n", " ").splitlines()
    for words in (shlex.split(c) for c in commands if c.startswith("kafka-acls.sh")):
        [flag] = [w for w in words if w in kinds or w == "--cluster"]
        resource = kinds.get(flag, CLUSTER)
        name = "kafka-cluster" if resource == CLUSTER else words[words.index(flag) + 1]
        prefixed = "prefixed" in words
        operations = tuple(words[i + 1] for i, w in enumerate(words) if w == "--operation")
        principal = words[words.index("--allow-principal") + 1]
        found.setdefault(principal, []).append(Grant(resource, name, prefixed, operations))
    return found
