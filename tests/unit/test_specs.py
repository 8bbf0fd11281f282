"""The explicit configs of the topics we create."""

from __future__ import annotations

from topology.specs import TopicLayout, bucket_topic_spec, internal_topic_specs

LAYOUT = TopicLayout(
    prefix="dk.",
    partitions=6,
    replication_factor=3,
    min_insync_replicas=2,
    max_message_bytes=1 << 20,
)


def test_internal_topics_are_compacted_with_explicit_configs() -> None:
    specs = internal_topic_specs(LAYOUT)
    assert [s.name for s in specs] == [
        "dk.internal.meta",
        "dk.internal.producers",
        "dk.internal.snapshots",
        "dk.internal.tier",
        "dk.internal.owners",
    ]
    for spec in specs:
        assert spec.configs["cleanup.policy"] == "compact"
        assert spec.configs["min.insync.replicas"] == "2"
        assert spec.configs["max.message.bytes"] == str(1 << 20)
        assert (spec.partitions, spec.replication_factor) == (1, 3)


def test_bucket_topics_keep_data_until_tiered() -> None:
    spec = bucket_topic_spec(LAYOUT, "orders")
    assert spec.name == "dk.bucket.orders"
    assert (spec.partitions, spec.replication_factor) == (6, 3)
    assert spec.configs["cleanup.policy"] == "delete"
    assert spec.configs["retention.ms"] == "-1"
