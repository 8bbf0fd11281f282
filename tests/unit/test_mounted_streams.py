"""How a catch-up read of a mounted key walks its index: fetch listed records, scan the rest."""

from __future__ import annotations

from adapter.log.key_index import KeyIndex, KeyPlaces
from adapter.service.mounted_streams import Step, next_step
from topology.mount_positions import position


def _places(index: KeyIndex) -> KeyPlaces:
    places = index.places("k")
    assert places is not None
    return places


def test_listed_records_are_fetched_one_partition_at_a_time() -> None:
    index = KeyIndex(max_positions=100)
    for at in (position(0, 4), position(0, 7), position(2, 1)):
        index.add("k", at, None)
    places = _places(index)
    assert next_step(places, 0) == Step(0, 4, 8, (4, 7))
    assert next_step(places, position(0, 5)) == Step(0, 7, 8, (7,))
    assert next_step(places, position(0, 8)) == Step(2, 1, 2, (1,))
    assert next_step(places, position(2, 2)) is None  # the tail


def test_a_dropped_range_is_scanned_by_key_in_the_keys_partitions() -> None:
    index = KeyIndex(max_positions=4)
    for at in [position(0, 10), position(2, 1), position(2, 5), position(2, 9), position(2, 12)]:
        index.add("k", at, None)
    places = _places(index)
    assert places.dense_from == position(2, 5)  # the older half went
    assert next_step(places, 0) == Step(0, 10, None, None)  # to partition 0's end
    assert next_step(places, position(1, 0)) == Step(2, 0, 5, None)  # 1 holds none of the key
    assert next_step(places, position(2, 5)) == Step(2, 5, 13, (5, 9, 12))
