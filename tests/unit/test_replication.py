"""Replication resolved from the broker count, and unreplicated topics refused where avoidable."""

from __future__ import annotations

import pytest

from topology.replication import AUTO, Replication, ReplicationRefused, resolve


@pytest.mark.parametrize(
    ("brokers", "expected"), [(1, (1, 1)), (2, (2, 1)), (3, (3, 2)), (6, (3, 2))]
)
def test_auto_follows_the_cluster(brokers: int, expected: tuple[int, int]) -> None:
    assert resolve(brokers, Replication(AUTO, AUTO)) == expected


def test_explicit_counts_win() -> None:
    assert resolve(5, Replication(5, 3)) == (5, 3)
    assert resolve(5, Replication(3, AUTO)) == (3, 2)
    assert resolve(5, Replication(2, AUTO)) == (2, 1)
    assert resolve(1, Replication(AUTO, 1)) == (1, 1)


def test_one_replica_on_three_brokers_needs_allowing() -> None:
    with pytest.raises(ReplicationRefused, match="allow_unreplicated") as refused:
        resolve(3, Replication(1, AUTO))
    assert not refused.value.retriable
    assert resolve(3, Replication(1, AUTO, allow_unreplicated=True)) == (1, 1)
    assert resolve(2, Replication(1, AUTO)) == (1, 1)  # two brokers: allowed, only warned


def test_more_in_sync_than_replicas_is_refused() -> None:
    with pytest.raises(ReplicationRefused, match="min_insync_replicas=2 is more than"):
        resolve(1, Replication(AUTO, 2))
