"""The explicit configuration of every topic we create, derived from the settings."""

from __future__ import annotations

from dataclasses import dataclass

from topology.naming import InternalTopic, bucket_topic, internal_topic, slots_topic


@dataclass(frozen=True)
class TopicLayout:
    """The settings that shape topics (a subset of adapter Settings, so topology stands alone)."""

    prefix: str
    partitions: int
    # Both 0 until start resolves `auto` from the broker count (`topology/replication.py`).
    replication_factor: int
    min_insync_replicas: int
    max_message_bytes: int
    write_slots: int = 8


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    replication_factor: int
    configs: dict[str, str]


# Each internal topic is replayed whole at start, so one partition keeps it totally ordered.
INTERNAL_PARTITIONS = 1


def internal_specs(layout: TopicLayout) -> list[TopicSpec]:
    """Every topic the server needs before it serves: the compacted ones, then the slots."""
    return [*internal_topic_specs(layout), slots_topic_spec(layout)]


def internal_topic_specs(layout: TopicLayout) -> list[TopicSpec]:
    return [_internal_spec(layout, which) for which in InternalTopic]


def _internal_spec(layout: TopicLayout, which: InternalTopic) -> TopicSpec:
    return TopicSpec(
        name=internal_topic(layout.prefix, which),
        partitions=INTERNAL_PARTITIONS,
        replication_factor=layout.replication_factor,
        configs={
            "cleanup.policy": "compact",
            "min.insync.replicas": str(layout.min_insync_replicas),
            "max.message.bytes": str(layout.max_message_bytes),
            # Tombstones must outlive a replay that started before them.
            "delete.retention.ms": str(24 * 3600 * 1000),
        },
    )


def slots_topic_spec(layout: TopicLayout) -> TopicSpec:
    """The coordination topic: empty, one partition per write slot (see topology/slots.py)."""
    return TopicSpec(
        name=slots_topic(layout.prefix),
        partitions=layout.write_slots,
        replication_factor=layout.replication_factor,
        configs={
            "cleanup.policy": "delete",
            "min.insync.replicas": str(layout.min_insync_replicas),
        },
    )


def bucket_topic_spec(layout: TopicLayout, bucket_id: str) -> TopicSpec:
    """A data topic keeps records until the tier worker or a snapshot frees them."""
    return TopicSpec(
        name=bucket_topic(layout.prefix, bucket_id),
        partitions=layout.partitions,
        replication_factor=layout.replication_factor,
        configs={
            "cleanup.policy": "delete",
            "retention.ms": "-1",
            "retention.bytes": "-1",
            "min.insync.replicas": str(layout.min_insync_replicas),
            "max.message.bytes": str(layout.max_message_bytes),
        },
    )
