"""The Kafka ACLs one instance needs, as data, and as `kafka-acls.sh` commands and Strimzi YAML.

Every topic, consumer group and transactional id of an instance starts with its topic prefix, so
each grant is PREFIXED on it. Nothing cluster-wide is needed at all (not even Describe), and no
Describe of its own: Kafka implies Describe from Read, Write and Delete. A mounted existing
topic needs Read on that topic alone. The integration tier grants exactly this set on a broker
with `allow.everyone.if.no.acl.found=false` and removes each operation in turn; each removal
makes an operation fail (tests/integration/test_secure_kafka_acls.py).
"""

from __future__ import annotations

from dataclasses import dataclass

# Kafka's names (kafka-acls.sh `--operation`, Strimzi's `operations`).
TOPIC, GROUP, TRANSACTIONAL_ID, CLUSTER = "Topic", "Group", "TransactionalId", "Cluster"
# Read: replaying the state topics, reads; Write: transactions; DescribeConfigs: verifying the
# internal topics' configs and resuming the catalog; Delete: freeing tiered records
# (DeleteRecords) and deleting a bucket's topic; Create: creating topics.
TOPIC_OPERATIONS = ("Read", "Write", "DescribeConfigs", "Delete")


@dataclass(frozen=True)
class Grant:
    """Operations allowed on one resource pattern."""

    resource: str  # TOPIC, GROUP, TRANSACTIONAL_ID or CLUSTER
    name: str  # the prefix or literal name ("kafka-cluster" for the cluster)
    prefixed: bool
    operations: tuple[str, ...]


def instance_grants(prefix: str, manage_topics: bool = True) -> list[Grant]:
    """What an instance with topic prefix `prefix` needs (`manage_topics`: it creates topics).

    Group Read: the owners' group, and the group ids its consumers never join (FindCoordinator
    checks them); TransactionalId Write: the slot writers' and mount writers' transactions."""
    create = ("Create",) if manage_topics else ()
    return [
        Grant(TOPIC, prefix, True, TOPIC_OPERATIONS + create),
        Grant(GROUP, prefix, True, ("Read",)),
        Grant(TRANSACTIONAL_ID, prefix, True, ("Write",)),
    ]


def mount_grants(topic: str, appends: bool = False) -> list[Grant]:
    """What mounting an existing topic needs, besides the instance's own grants (a mount that
    takes appends writes to it: with an idempotent producer, which Write alone allows)."""
    return [Grant(TOPIC, topic, False, ("Read", "Write") if appends else ("Read",))]


def kafka_acls_commands(principal: str, grants: list[Grant]) -> str:
    """One `kafka-acls.sh --add` per grant (the admin's own connection options left out)."""
    lines = []
    for grant in grants:
        resource = {
            TOPIC: f"--topic '{grant.name}'",
            GROUP: f"--group '{grant.name}'",
            TRANSACTIONAL_ID: f"--transactional-id '{grant.name}'",
            CLUSTER: "--cluster",
        }[grant.resource]
        pattern = " --resource-pattern-type prefixed" if grant.prefixed else ""
        operations = " ".join(f"--operation {op}" for op in grant.operations)
        lines.append(
            'kafka-acls.sh --bootstrap-server "$BOOTSTRAP" --command-config admin.properties --add'
            f" \\\n  --allow-principal '{principal}' {resource}{pattern} \\\n  {operations}"
        )
    return "\n".join(lines)


def strimzi_acls(grants: list[Grant], indent: int = 6) -> str:
    """The grants as the `acls:` list of a Strimzi `KafkaUser`'s `spec.authorization`."""
    kind = {TOPIC: "topic", GROUP: "group", TRANSACTIONAL_ID: "transactionalId"}
    pad = " " * indent
    lines = []
    for grant in grants:
        if grant.resource == CLUSTER:
            lines.append(f"{pad}- resource:\n{pad}    type: cluster")
        else:
            pattern = "prefix" if grant.prefixed else "literal"
            lines.append(
                f"{pad}- resource:\n{pad}    type: {kind[grant.resource]}\n"
                f"{pad}    name: {grant.name}\n{pad}    patternType: {pattern}"
            )
        lines.append(f"{pad}  operations: [{', '.join(grant.operations)}]")
    return "\n".join(lines)
