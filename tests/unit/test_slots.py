"""The mapping of partitions and buckets onto write slots."""

from __future__ import annotations

from collections import Counter

import pytest

from topology.slots import SlotMap, slot_of_bucket, slot_of_partition, slot_of_stream

# Pinned: changing the mapping would move every stream to another slot on an upgrade, while
# instances of both releases run side by side.
PINNED_PARTITIONS = [6, 0, 1, 7]
PINNED_BUCKETS = [0, 7, 6]


def test_the_helpers_agree() -> None:
    assert slot_of_stream("dk.", "orders", 3, 8) == slot_of_partition("dk.bucket.orders", 3, 8)
    assert SlotMap("dk.", 8).of_bucket("orders") == slot_of_bucket("orders", 8)
    assert SlotMap("dk.", 8).of_stream("orders", 3) == slot_of_stream("dk.", "orders", 3, 8)


def test_pinned_slots() -> None:
    assert [slot_of_partition("dk.bucket.orders", p, 8) for p in range(4)] == PINNED_PARTITIONS
    assert [slot_of_bucket(b, 8) for b in ("a", "orders", "_default")] == PINNED_BUCKETS


def test_many_partitions_spread_over_few_slots() -> None:
    counts = Counter(
        slot_of_partition(f"dk.bucket.b{b}", p, 8) for b in range(50) for p in range(12)
    )
    assert set(counts) == set(range(8))
    assert max(counts.values()) < 2 * min(counts.values())


def test_every_slot_is_in_range_and_one_slot_takes_everything() -> None:
    assert {slot_of_partition("t", p, 3) for p in range(100)} <= {0, 1, 2}
    assert {slot_of_bucket(f"b{i}", 1) for i in range(20)} == {0}


def test_there_is_at_least_one_slot() -> None:
    with pytest.raises(ValueError, match="at least one"):
        slot_of_bucket("a", 0)
