"""Who creates, alters and deletes our topics (the server, or a platform team), and what an
existing topic must have for the server to write to it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from topology.errors import TopologyError
from topology.specs import TopicSpec


class TopicManagement(StrEnum):
    AUTO = "auto"  # the server creates its topics, and deletes a bucket's with the bucket
    EXTERNAL = "external"  # a platform team does: the server only verifies and uses them


# Without these, writing to a topic loses data whoever made it: a compacted bucket topic keeps
# one record per stream, an internal topic that is not compacted loses state to retention.
REQUIRED_CONFIGS = frozenset({"cleanup.policy"})
# Also required of a topic a platform team made, since its defaults are a cluster's (7 days'
# retention, 1 MiB records) rather than ours: retention would delete stream data the tier has
# not copied yet, a smaller record limit would fail every transaction holding a large append.
REQUIRED_OF_EXTERNAL = frozenset({"retention.ms", "retention.bytes", "max.message.bytes"})
# Settings where a larger value serves as well as the one we ask for.
AT_LEAST = frozenset({"max.message.bytes", "min.insync.replicas"})


class ManagedExternally(TopologyError):
    """A topic change was asked for while a platform team manages the topics: a bug, since
    every caller asks the policy first."""


@dataclass(frozen=True)
class TopicPolicy:
    """The one place that says whether the server may create, alter or delete topics."""

    management: TopicManagement = TopicManagement.AUTO

    @property
    def manages_topics(self) -> bool:
        return self.management is TopicManagement.AUTO

    def allow(self, action: str, names: Iterable[str]) -> None:
        """Raise ManagedExternally unless the server may `action` ('create', ...) the topics."""
        if not self.manages_topics:
            raise ManagedExternally(
                f"topic_management is external: not allowed to {action} {sorted(names)}"
            )

    def required(self, key: str) -> bool:
        """Whether a topic whose `key` differs from ours must not be written to."""
        return key in REQUIRED_CONFIGS or (not self.manages_topics and key in REQUIRED_OF_EXTERNAL)


@dataclass(frozen=True)
class Findings:
    """What an existing topic's configs differ in: refusals, and drift only worth a warning."""

    refusals: list[str]
    warnings: list[str]


def config_findings(spec: TopicSpec, actual: dict[str, str], policy: TopicPolicy) -> Findings:
    """Compare an existing topic's configs with the spec's, key by key."""
    refusals: list[str] = []
    warnings: list[str] = []
    for key, wanted in spec.configs.items():
        found = actual.get(key)
        if _suffices(key, found, wanted):
            continue
        finding = f"{key}={found!r} (durable-kafka needs {key}={wanted!r})"
        (refusals if policy.required(key) else warnings).append(finding)
    return Findings(refusals, warnings)


def _suffices(key: str, found: str | None, wanted: str) -> bool:
    if found == wanted:
        return True
    if key not in AT_LEAST or found is None:
        return False
    try:
        return int(found) >= int(wanted)
    except ValueError:
        return False
