"""What the deployment files (compose, the Helm chart, the Strimzi examples) must agree with:
the server's setting names, and the Kafka ACL set docs/operations.md documents."""

from __future__ import annotations

from dataclasses import dataclass

from adapter.config import env_name, setting_names

# Settings of a secured deployment, passed on by the chart and the compose `secure` profile.
# They are known names even where `Settings` does not define them.
SECURED_SETTINGS = frozenset(
    {"kafka_client_file", "tls_cert_file", "tls_key_file", "tls_client_ca_file", "topic_management"}
)


def known_variables() -> set[str]:
    """Every DURABLE_KAFKA_* variable the server reads."""
    return {env_name(name) for name in {*setting_names(), *SECURED_SETTINGS}}


@dataclass(frozen=True)
class Acl:
    """One allow rule for the server's principal, in kafka-acls.sh's words."""

    resource: str  # topic, group, transactional-id, cluster
    name: str  # "" for the cluster
    pattern: str  # prefixed, literal
    operations: frozenset[str]


def documented_acls(prefix: str, topic_management: str) -> set[Acl]:
    """The ACLs the server needs under `prefix`, and no more: everything it names starts with
    the prefix; it creates, reconfigures and deletes (records of) topics only when it manages
    them; cluster-wide it only describes."""
    topic_operations = {"Describe", "DescribeConfigs", "Read", "Write"}
    if topic_management == "auto":
        topic_operations |= {"Create", "Alter", "AlterConfigs", "Delete"}
    return {
        Acl("topic", prefix, "prefixed", frozenset(topic_operations)),
        Acl("group", prefix, "prefixed", frozenset({"Read", "Describe"})),
        Acl("transactional-id", prefix, "prefixed", frozenset({"Write", "Describe"})),
        Acl("cluster", "", "literal", frozenset({"Describe"})),
    }


def mounted_topic_acl(topic: str) -> Acl:
    """All a mounted existing topic needs."""
    return Acl("topic", topic, "literal", frozenset({"Read", "Describe"}))
