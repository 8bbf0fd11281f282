"""Write slots: every (bucket topic, partition) and every bucket id maps to one of N slots.

A slot is the unit of write ownership. Each slot has its own transactional producer
(`{prefix}writer-{slot}`), and the instance holding partition `slot` of the coordination
topic `{prefix}internal.slots` owns it. The mapping must be the same on every instance and
in every release, so it is Kafka's murmur2 over a fixed spelling of the key, never Python's
salted `hash`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from topology.naming import bucket_topic
from topology.placement import murmur2

# Every write asks for its slot, and murmur2 in Python is ~25 calls: the answers (a few per
# bucket partition) are remembered, up to this many.
CACHED = 65_536


def slot_of_partition(topic: str, partition: int, slots: int) -> int:
    """The slot that writes partition `partition` of data topic `topic`."""
    return _slot(f"p\x00{topic}\x00{partition}", slots)


@functools.lru_cache(maxsize=CACHED)
def slot_of_bucket(bucket_id: str, slots: int) -> int:
    """The slot that decides bucket-level changes (create, delete) of `bucket_id`."""
    return _slot(f"b\x00{bucket_id}", slots)


@functools.lru_cache(maxsize=CACHED)
def slot_of_stream(prefix: str, bucket_id: str, partition: int, slots: int) -> int:
    """The slot of a stream, from its bucket id and partition (topic names are derived)."""
    return slot_of_partition(bucket_topic(prefix, bucket_id), partition, slots)


def _slot(key: str, slots: int) -> int:
    if slots <= 0:
        raise ValueError(f"there is at least one write slot, not {slots}")
    return (murmur2(key.encode()) & 0x7FFFFFFF) % slots


@dataclass(frozen=True)
class SlotMap:
    """The slot mapping of one topic prefix with `count` slots."""

    prefix: str
    count: int

    def of_stream(self, bucket_id: str, partition: int) -> int:
        return slot_of_stream(self.prefix, bucket_id, partition, self.count)

    def of_bucket(self, bucket_id: str) -> int:
        return slot_of_bucket(bucket_id, self.count)
