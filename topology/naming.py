"""Names under one prefix: a data topic per bucket, the internal topics, the owners' group
and the writers' transactional ids."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum

# The adapter's `topic_prefix` unless configured; Spark jobs assume it too unless told.
DEFAULT_PREFIX = "durable-kafka."

# Bucket ids never contain '.', so the infixes keep data and internal topics apart for any id.
BUCKET_INFIX = "bucket."
INTERNAL_INFIX = "internal."


class InternalTopic(StrEnum):
    """The compacted topics that hold everything besides message bytes."""

    META = "meta"  # bucket and stream metadata
    PRODUCERS = "producers"  # idempotent-producer state
    SNAPSHOTS = "snapshots"  # snapshot pointers
    TIER = "tier"  # cold-tier manifests
    OWNERS = "owners"  # which instance writes each write slot, and where to forward to


def bucket_topic(prefix: str, bucket_id: str) -> str:
    return f"{prefix}{BUCKET_INFIX}{bucket_id}"


def bucket_of_topic(prefix: str, topic: str) -> str | None:
    """The bucket id a data topic holds, or None for any other topic."""
    head = prefix + BUCKET_INFIX
    return topic[len(head) :] if topic.startswith(head) and len(topic) > len(head) else None


def internal_topic(prefix: str, which: InternalTopic) -> str:
    return f"{prefix}{INTERNAL_INFIX}{which.value}"


def slots_topic(prefix: str) -> str:
    """The coordination topic: one partition per write slot; holding partition k = owning slot k.

    Nothing is written to it; the group `owners_group(prefix)` only uses its partitions.
    """
    return f"{prefix}{INTERNAL_INFIX}slots"


def owners_group(prefix: str) -> str:
    """The consumer group whose members share the write slots of one topic prefix."""
    return f"{prefix}owners"


def writer_transactional_id(prefix: str, slot: int) -> str:
    """The transactional id of slot `slot`'s producer: a new owner's init fences the old one."""
    return f"{prefix}writer-{slot}"


def bucket_topic_pattern(prefix: str) -> str:
    """A Java regex matching every bucket topic (Spark's `subscribePattern`)."""
    return "^" + "".join("\\" + c if c in ".-" else c for c in prefix + BUCKET_INFIX) + ".+$"


@dataclass(frozen=True)
class StateTopics:
    """The compacted topics that state is written to, under one prefix."""

    meta: str
    producers: str
    owners: str
    snapshots: str
    tier: str

    def by_kind(self) -> dict[str, str]:
        """Each topic under its kind's name (`meta`, `producers`, ...): a metric label."""
        return asdict(self)

    @classmethod
    def of(cls, prefix: str) -> StateTopics:
        return cls(
            internal_topic(prefix, InternalTopic.META),
            internal_topic(prefix, InternalTopic.PRODUCERS),
            internal_topic(prefix, InternalTopic.OWNERS),
            internal_topic(prefix, InternalTopic.SNAPSHOTS),
            internal_topic(prefix, InternalTopic.TIER),
        )
