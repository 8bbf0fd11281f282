"""The topic policy: what external management forbids, and what an existing topic must have."""

from __future__ import annotations

import pytest

from topology.management import (
    ManagedExternally,
    TopicManagement,
    TopicPolicy,
    config_findings,
)
from topology.specs import TopicLayout, bucket_topic_spec, internal_topic_specs

AUTO = TopicPolicy(TopicManagement.AUTO)
EXTERNAL = TopicPolicy(TopicManagement.EXTERNAL)
LAYOUT = TopicLayout("dk.", 6, 3, 2, 8 << 20)
BUCKET = bucket_topic_spec(LAYOUT, "orders")
META = internal_topic_specs(LAYOUT)[0]


def test_only_auto_may_create_alter_or_delete() -> None:
    assert AUTO.manages_topics
    assert not EXTERNAL.manages_topics
    AUTO.allow("create", ["dk.bucket.orders"])
    for action in ("create", "delete"):
        with pytest.raises(ManagedExternally, match=f"not allowed to {action}") as refused:
            EXTERNAL.allow(action, ["dk.bucket.orders"])
        assert not refused.value.retriable


def test_a_topic_as_specified_has_no_findings() -> None:
    for policy in (AUTO, EXTERNAL):
        findings = config_findings(BUCKET, dict(BUCKET.configs), policy)
        assert (findings.refusals, findings.warnings) == ([], [])


def test_a_meta_topic_that_is_not_compacted_is_refused_in_either_mode() -> None:
    actual = dict(META.configs) | {"cleanup.policy": "delete"}
    for policy in (AUTO, EXTERNAL):
        (refusal,) = config_findings(META, actual, policy).refusals
        assert refusal == "cleanup.policy='delete' (durable-kafka needs cleanup.policy='compact')"


def test_a_platform_default_retention_is_refused_only_when_managed_externally() -> None:
    # What a topic created without configs has: the cluster's 7 days and 1 MiB.
    actual = dict(BUCKET.configs) | {"retention.ms": "604800000", "max.message.bytes": "1048588"}
    external = config_findings(BUCKET, actual, EXTERNAL)
    assert [r.split("=")[0] for r in external.refusals] == ["retention.ms", "max.message.bytes"]
    auto = config_findings(BUCKET, actual, AUTO)
    assert auto.refusals == []
    assert len(auto.warnings) == 2


def test_more_than_asked_suffices_where_more_is_as_good() -> None:
    actual = dict(BUCKET.configs) | {"max.message.bytes": str(16 << 20), "min.insync.replicas": "3"}
    assert config_findings(BUCKET, actual, EXTERNAL).refusals == []
    assert config_findings(BUCKET, actual, EXTERNAL).warnings == []
    fewer = dict(BUCKET.configs) | {"min.insync.replicas": "1"}
    findings = config_findings(BUCKET, fewer, EXTERNAL)
    assert findings.refusals == []
    assert findings.warnings[0].startswith("min.insync.replicas='1'")
