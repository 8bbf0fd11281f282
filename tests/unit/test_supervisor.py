"""Start-up's durability judgement: weak topics on a cluster that allows better, slow commits."""

from __future__ import annotations

from dataclasses import replace
from typing import cast

import pytest

from adapter.objects.base import ObjectStore
from adapter.readiness import Readiness
from adapter.supervisor import (
    CHECKS,
    Durability,
    Supervisor,
    WeakTopics,
    durability_findings,
    slow_transactions,
    weak_topics,
    worst_transaction_ms,
)
from topology.admin import TopologyAdmin
from topology.replication import ReplicationRefused

DEFAULT_TIMEOUT_MS = 10_000


def _durability(
    rf: int, isr: int, timeout_ms: int = DEFAULT_TIMEOUT_MS, require: bool = False
) -> Durability:
    return Durability(rf, isr, timeout_ms, require)


@pytest.mark.parametrize(
    ("brokers", "rf", "isr"),
    [(1, 1, 1), (2, 1, 1), (2, 2, 1), (3, 3, 2), (5, 3, 2), (5, 5, 3), (0, 1, 1)],
)
def test_topics_as_durable_as_the_cluster_allows(brokers: int, rf: int, isr: int) -> None:
    assert weak_topics(brokers, _durability(rf, isr)) is None


@pytest.mark.parametrize(
    ("brokers", "rf", "isr"), [(3, 1, 1), (3, 3, 1), (3, 2, 2), (6, 2, 1), (3, 5, 1)]
)
def test_weak_topics_on_three_brokers_or_more(brokers: int, rf: int, isr: int) -> None:
    warning = weak_topics(brokers, _durability(rf, isr))
    assert warning is not None
    assert f"{brokers} brokers" in warning
    assert "replication_factor=3" in warning
    assert "min_insync_replicas=2" in warning


def test_the_worst_transaction_is_a_flush_and_every_commit_attempt() -> None:
    assert worst_transaction_ms(10_000) == 40_000
    assert slow_transactions(DEFAULT_TIMEOUT_MS) is None
    assert slow_transactions(14_999) is None
    warning = slow_transactions(15_000)
    assert warning is not None
    assert "kafka_timeout_ms to at most 14999" in warning
    assert "60000" in warning


def test_findings_warn_and_refuse_only_when_required() -> None:
    weak = _durability(1, 1)
    assert durability_findings(1, weak).warnings == []
    warned = durability_findings(3, weak)
    assert (len(warned.warnings), warned.refuse) == (1, False)
    required = _durability(1, 1, require=True)
    assert durability_findings(3, required).refuse
    assert not durability_findings(1, required).refuse  # a single broker cannot do better
    assert not durability_findings(3, _durability(3, 2, require=True)).refuse


def test_slow_commits_warn_but_never_refuse() -> None:
    findings = durability_findings(3, _durability(3, 2, timeout_ms=30_000, require=True))
    assert len(findings.warnings) == 1
    assert "transaction.timeout.ms" in findings.warnings[0]
    assert not findings.refuse
    both = durability_findings(3, _durability(1, 1, timeout_ms=30_000, require=True))
    assert (len(both.warnings), both.refuse) == (2, True)


class ThreeBrokers:
    """The two admin calls start-up makes before it loads anything, on a cluster of three."""

    def __init__(self) -> None:
        self.ensured = False

    async def broker_count(self) -> int:
        return 3

    def use_replication(self, replication_factor: int, min_insync_replicas: int) -> None:
        self.replication = (replication_factor, min_insync_replicas)

    async def ensure_internal_topics(self) -> list[str]:
        self.ensured = True
        return []


async def _nothing_to_load() -> int:
    raise AssertionError("start-up went past the durability check")


async def test_start_up_refuses_before_creating_any_topic() -> None:
    admin = ThreeBrokers()
    supervisor = Supervisor(
        cast(TopologyAdmin, admin),
        cast(ObjectStore, None),
        Readiness(CHECKS),
        _nothing_to_load,
        replace(_durability(1, 1, require=True), allow_unreplicated=True),
    )
    with pytest.raises(WeakTopics, match="require_durable_topics is true") as refused:
        await supervisor.run()
    assert not refused.value.retriable  # the app's fatal path: exit 1
    assert not admin.ensured


async def test_start_up_refuses_an_unreplicated_factor_on_three_brokers() -> None:
    admin = ThreeBrokers()
    supervisor = Supervisor(
        cast(TopologyAdmin, admin),
        cast(ObjectStore, None),
        Readiness(CHECKS),
        _nothing_to_load,
        _durability(1, 0),
    )
    with pytest.raises(ReplicationRefused, match="allow_unreplicated") as refused:
        await supervisor.run()
    assert not refused.value.retriable
    assert not admin.ensured


def test_auto_replication_is_resolved_for_the_cluster() -> None:
    auto = _durability(0, 0)
    assert (auto.resolved(1).replication_factor, auto.resolved(1).min_insync_replicas) == (1, 1)
    assert (auto.resolved(5).replication_factor, auto.resolved(5).min_insync_replicas) == (3, 2)
    assert durability_findings(5, auto.resolved(5)).warnings == []
