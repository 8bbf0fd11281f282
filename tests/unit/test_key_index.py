"""The key index: positions per key in order, bounded per key, and keys listed in order."""

from __future__ import annotations

from adapter.log.key_index import KeyIndex
from topology.mount_positions import position


def test_positions_are_kept_in_order_across_partitions() -> None:
    index = KeyIndex(max_positions=100)
    for at in (position(1, 5), position(1, 9), position(0, 3), position(2, 0), position(1, 9)):
        index.add("k", at, None)
    places = index.places("k")
    assert places is not None
    assert places.positions.tolist() == [
        position(p, o) for p, o in [(0, 3), (1, 5), (1, 9), (2, 0)]
    ]
    assert places.partitions == (0, 1, 2)
    assert places.tail == position(2, 1)
    assert places.listed_from(position(1, 6), 2) == [position(1, 9), position(2, 0)]


def test_a_key_keeps_at_most_its_bound_and_remembers_the_dropped_range() -> None:
    index = KeyIndex(max_positions=8)
    for offset in range(100):
        index.add("k", position(0, offset * 10), None)
    places = index.places("k")
    assert places is not None
    assert len(places.positions) <= 8
    assert places.first == 0
    assert places.dense_from == places.positions[0] > 0
    assert places.positions[-1] == position(0, 990)
    assert index.counts.records == 100


def test_keys_are_listed_in_order_with_prefix_and_cursor() -> None:
    index = KeyIndex(max_positions=4)
    for n, name in enumerate(["b-2", "a-1", "b-1", "c", "b-10"]):
        index.add(name, n, "text/plain" if name == "c" else None)
    assert list(index.ids("b-", None)) == ["b-1", "b-10", "b-2"]
    assert list(index.ids("b-", "b-10")) == ["b-2"]
    assert list(index.ids("", "b-2")) == ["c"]
    index.add("a-0", 9, None)  # a new key reorders the listing
    assert list(index.ids("a", None)) == ["a-0", "a-1"]
    assert len(index) == 6
