"""Topic names for buckets and internal topics."""

from __future__ import annotations

import re

from topology.naming import (
    InternalTopic,
    bucket_of_topic,
    bucket_topic,
    bucket_topic_pattern,
    internal_topic,
)


def test_bucket_topic_round_trips() -> None:
    topic = bucket_topic("durable-kafka.", "my_bucket-1")
    assert topic == "durable-kafka.bucket.my_bucket-1"
    assert bucket_of_topic("durable-kafka.", topic) == "my_bucket-1"


def test_other_topics_are_not_buckets() -> None:
    prefix = "durable-kafka."
    assert bucket_of_topic(prefix, internal_topic(prefix, InternalTopic.META)) is None
    assert bucket_of_topic(prefix, "durable-kafka.bucket.") is None
    assert bucket_of_topic(prefix, "other.bucket.x") is None


def test_internal_topics_never_collide_with_buckets() -> None:
    prefix = "p."
    internal = {internal_topic(prefix, which) for which in InternalTopic}
    assert len(internal) == 5
    # Even a bucket named like an internal topic lands elsewhere.
    assert bucket_topic(prefix, "internal") not in internal


def test_pattern_matches_exactly_the_bucket_topics() -> None:
    pattern = re.compile(bucket_topic_pattern("durable-kafka."))
    assert pattern.match("durable-kafka.bucket.orders")
    assert not pattern.match("durable-kafka.internal.meta")
    assert not pattern.match("durable-kafkaXbucketXorders")
