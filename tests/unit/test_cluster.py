"""The several-instance tests' helpers (`tests/cluster.py`): a stream of `_default` is found in
every write slot, whatever the topic prefix."""

from __future__ import annotations

from tests.cluster import PARTITIONS, SLOTS, partitions, slot_of, stream_in

PREFIXES = [f"dead{i:02x}." for i in range(64)]  # as the tests name theirs


def test_every_slot_of_every_prefix_has_a_stream_of_the_default_bucket() -> None:
    for prefix in PREFIXES:
        for slot in range(SLOTS):
            assert slot_of(prefix, stream_in(prefix, {slot}, "s")) == slot, (prefix, slot)


def test_a_prefix_gets_more_partitions_only_when_it_needs_them() -> None:
    counts = [partitions(prefix) for prefix in PREFIXES]
    assert min(counts) == PARTITIONS
    assert any(count > PARTITIONS for count in counts)  # some prefixes need more
