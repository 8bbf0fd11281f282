"""`durable-kafka acls plan`: the Kafka ACLs the server's settings need, for a platform team
to grant (`kafka-acls.sh` commands, or a Strimzi KafkaUser), and a Spark reader's on request.

The plan follows the settings: Create only when the server creates its topics
(`topic_management = auto`), a literal Read (and Write for `appends`) per `[[mounts]]` topic,
and one grant per `mount_topics` pattern that an ACL can express (`orders`, `shared-*`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Literal

from adapter.config import ConfigError, Settings, comma_list
from adapter.parts import configured_mounts
from topology.acls import (
    Grant,
    KafkaUserMeta,
    instance_grants,
    kafka_acls_commands,
    mount_grants,
    spark_reader_grants,
    strimzi_user,
)

AclFormat = Literal["kafka-acls", "strimzi"]
ACL_FORMATS: tuple[AclFormat, ...] = ("kafka-acls", "strimzi")
DEFAULT_USER = "durable-kafka"
DEFAULT_NAMESPACE = "kafka"
_GLOB = "*?["


@dataclass
class AclPlan:
    """The server's grants, what an ACL cannot express (`notes`), and the Spark reader's."""

    server: list[Grant]
    notes: list[str] = field(default_factory=list)
    spark: list[Grant] = field(default_factory=list)


def plan(settings: Settings, spark: bool) -> AclPlan:
    """The grants the settings need (ConfigError for a `[[mounts]]` table that is not valid)."""
    prefix = settings.topic_prefix
    server = instance_grants(prefix, manage_topics=settings.topic_management == "auto")
    for mount in configured_mounts(settings):
        server += mount_grants(mount.spec.topic, appends=mount.spec.appends)
    notes = []
    for pattern in comma_list(settings.mount_topics):
        grant = _pattern_grant(pattern)
        if grant is None:
            notes.append(
                f"mount_topics pattern {pattern!r} is no ACL: grant Read on each topic it allows"
            )
        else:
            server.append(grant)
    return AclPlan(server, notes, spark_reader_grants(prefix) if spark else [])


def _pattern_grant(pattern: str) -> Grant | None:
    """A `mount_topics` glob as one ACL: a name (literal), `stem*` (prefixed), `*` (Kafka's
    literal wildcard); None for anything else. Read only: an HTTP mount taking appends
    needs Write on its topic as well."""
    stem = pattern.removesuffix("*")
    if any(c in stem for c in _GLOB):
        return None
    if pattern == "*":
        return mount_grants("*")[0]
    return mount_grants(stem, prefixed=stem != pattern)[0]


def print_acls(
    settings: Settings,
    fmt: AclFormat,
    user: str,
    spark_user: str | None,
    strimzi_cluster: str = "my-cluster",
    namespace: str = DEFAULT_NAMESPACE,
) -> int:
    """Print the plan; 2 (with the reason on stderr) for settings it cannot be made from."""
    try:
        found = plan(settings, spark_user is not None)
    except ConfigError as error:
        print(f"durable-kafka: configuration error: {error}", file=sys.stderr)
        return 2
    if fmt == "strimzi":
        meta = KafkaUserMeta(user, namespace, strimzi_cluster, f"{user}-kafka-credentials")
        text = strimzi_user(meta, found.server, _header(settings, found.notes))
        if spark_user is not None:
            reader = KafkaUserMeta(spark_user, namespace, strimzi_cluster)
            text += "---\n" + strimzi_user(reader, found.spark, _SPARK_HEADER)
        print(text, end="")
        return 0
    blocks = [f"# {line}" for line in _header(settings, found.notes).splitlines()]
    blocks += _commands(f"User:{user}", found.server)
    if spark_user is not None:
        blocks += [f"# {_SPARK_HEADER}", *_commands(f"User:{spark_user}", found.spark)]
    print("\n".join(blocks))
    return 0


def _commands(principal: str, grants: list[Grant]) -> list[str]:
    return [f"# {g.why}\n{kafka_acls_commands(principal, [g])}" for g in grants]


def _header(settings: Settings, notes: list[str]) -> str:
    lines = [
        f"The ACLs of durable-kafka with topic_prefix '{settings.topic_prefix}' and",
        f"topic_management = {settings.topic_management}: all it needs, nothing cluster-wide.",
        "Printed by `durable-kafka acls plan`; regenerate rather than edit.",
    ]
    return "\n".join(lines + [f"Not granted: {note}" for note in notes])


_SPARK_HEADER = "A Spark job reading the buckets (spark_streaming): read only."
