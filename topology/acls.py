"""The Kafka ACLs one instance needs, as data, and as `kafka-acls.sh` commands and Strimzi YAML.

Every topic, consumer group and transactional id of an instance starts with its topic prefix, so
each grant is PREFIXED on it; Delete only on the bucket topics' prefix (`<prefix>bucket.`), as
nothing deletes an internal topic or its records. Nothing cluster-wide is needed at all (not
even Describe), and no Describe of its own: Kafka implies Describe from Read, Write and Delete.
A mounted existing topic needs Read on that topic alone. The integration tier grants exactly
this set on a broker with `allow.everyone.if.no.acl.found=false` and removes each operation in
turn; each removal makes an operation fail (tests/integration/test_secure_kafka_acls.py).
`durable-kafka acls plan` prints it (adapter/acl_plan.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from topology.naming import BUCKET_INFIX, InternalTopic, internal_topic

# Kafka's names (kafka-acls.sh `--operation`, Strimzi's `operations`).
TOPIC, GROUP, TRANSACTIONAL_ID, CLUSTER = "Topic", "Group", "TransactionalId", "Cluster"
# Read: replaying the state topics, reads; Write: transactions; DescribeConfigs: verifying the
# internal topics' configs and resuming the catalog; Create: creating topics.
TOPIC_OPERATIONS = ("Read", "Write", "DescribeConfigs")
# Kafka authorizes DeleteRecords (the tier freeing what it copied) and DeleteTopics (a bucket
# deleted) alike, as Delete: needed on bucket topics in either topic management mode.
BUCKET_TOPIC_OPERATIONS = ("Delete",)
# The internal topics the Spark reader reads (spark_streaming/cold.py), and its groups' prefix.
SPARK_INTERNAL_TOPICS = (InternalTopic.META, InternalTopic.TIER)
SPARK_GROUP_INFIX = "spark"


@dataclass(frozen=True)
class Grant:
    """Operations allowed on one resource pattern (`why`: what needs them, for comments)."""

    resource: str  # TOPIC, GROUP, TRANSACTIONAL_ID or CLUSTER
    name: str  # the prefix or literal name ("kafka-cluster" for the cluster)
    prefixed: bool
    operations: tuple[str, ...]
    why: str = ""


def instance_grants(prefix: str, manage_topics: bool = True) -> list[Grant]:
    """What an instance with topic prefix `prefix` needs (`manage_topics`: it creates topics).

    Group Read: the owners' group, the covered offsets' group (committed to, never joined),
    and the group ids its consumers never join (FindCoordinator checks them); TransactionalId
    Write: the slot writers' and mount writers' transactions."""
    create = ("Create",) if manage_topics else ()
    creates = ", creating them" if manage_topics else ""
    deletes = " and deleting a bucket's topic" if manage_topics else "; topics are external"
    return [
        Grant(
            TOPIC,
            prefix,
            True,
            TOPIC_OPERATIONS + create,
            f"Data and internal topics: reads, appends, their configs checked at start{creates}.",
        ),
        Grant(
            TOPIC,
            prefix + BUCKET_INFIX,
            True,
            BUCKET_TOPIC_OPERATIONS,
            f"Bucket topics only: DeleteRecords, with which the tier frees Kafka{deletes}.",
        ),
        Grant(GROUP, prefix, True, ("Read",), "Every consumer group starts with the prefix."),
        Grant(
            TRANSACTIONAL_ID,
            prefix,
            True,
            ("Write",),
            "The write slots' and the mount writers' transactional producers.",
        ),
    ]


def spark_reader_grants(prefix: str) -> list[Grant]:
    """What a Spark job reading the buckets (spark_streaming) needs: Read (and Describe, which
    Read implies, listed for the reader's admin calls) on bucket topics and the internal topics
    it reads; Read on its consumer groups (Spark's `groupIdPrefix`, `<prefix>spark`)."""
    reading = ("Read", "Describe")
    return [
        Grant(TOPIC, prefix + BUCKET_INFIX, True, reading, "The Spark reader: bucket topics."),
        *(
            Grant(
                TOPIC,
                internal_topic(prefix, which),
                False,
                reading,
                f"The Spark reader: the {which.value} topic (where cold data is).",
            )
            for which in SPARK_INTERNAL_TOPICS
        ),
        Grant(GROUP, prefix + SPARK_GROUP_INFIX, True, ("Read",), "The Spark reader's groups."),
    ]


def mount_grants(topic: str, appends: bool = False, prefixed: bool = False) -> list[Grant]:
    """What mounting an existing topic needs, besides the instance's own grants (a mount that
    takes appends writes to it: with an idempotent producer, which Write alone allows);
    `prefixed`: every topic starting with `topic` (a `mount_topics` pattern `name*`)."""
    operations = ("Read", "Write") if appends else ("Read",)
    what = "Topics starting with it may be mounted." if prefixed else "A mounted existing topic."
    return [Grant(TOPIC, topic, prefixed, operations, what)]


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


@dataclass(frozen=True)
class KafkaUserMeta:
    """Who a Strimzi KafkaUser is: its name, namespace, cluster, and the Secret (key
    `password`) its SCRAM password comes from (empty: Strimzi generates one)."""

    name: str
    namespace: str
    cluster: str
    password_secret: str = ""


def strimzi_user(user: KafkaUserMeta, grants: list[Grant], header: str) -> str:
    """A whole Strimzi `KafkaUser` (SCRAM-SHA-512) holding exactly `grants`, each under a
    comment saying what needs it; `header` becomes the document's leading comment."""
    password = (
        "    password:\n      valueFrom:\n        secretKeyRef:\n"
        f"          name: {user.password_secret}\n          key: password\n"
        if user.password_secret
        else ""
    )
    rules = "\n".join(
        (f"      # {grant.why}\n" if grant.why else "") + strimzi_acls([grant]) for grant in grants
    )
    comment = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines())
    return (
        f"{comment}apiVersion: kafka.strimzi.io/v1beta2\nkind: KafkaUser\nmetadata:\n"
        f"  name: {user.name}\n  namespace: {user.namespace}\n  labels:\n"
        f"    strimzi.io/cluster: {user.cluster}\nspec:\n  authentication:\n"
        f"    type: scram-sha-512\n{password}  authorization:\n    type: simple\n"
        f"    acls:\n{rules}\n"
    )
