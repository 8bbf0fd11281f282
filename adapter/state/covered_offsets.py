"""Per partition of a bucket topic, an offset below which every committed record is in its
stream's state records: where a write slot's new owner may start its scan
(`state/slot_takeover.py`), however far back the slot's quietest stream ends.

Without it the scan starts at the lowest tail among the partition's streams, and one stream
appended to once and then left quiet makes each takeover read everything its busy neighbours
appended since, up to the log start (about 45 s per GiB of small records).

The slot's owner works it out at each checkpoint pass (`CheckpointNotes.covered`) and, once the
pass's transaction has committed, commits it as the offset of the partition in the consumer
group `{topic_prefix}covered`, which no consumer ever joins (Kafka's own store of positions:
no state topic's format changes, and an instance that does not know it neither reads nor
writes it). The offset's metadata is the bucket's creation time, so the offset of a topic
deleted and made again under the same name is never trusted.

Why an offset once committed stays true: a record below it is in its stream's state records
(its tail past it, its producer's state at or past it), and a stream's state records only move
forward; a stream deleted since has no records anyone reads. So a value committed late, by an
owner fenced since, is lower than it could be, never wrong. A new owner reads it after its
producer's init and after the catalog has followed the state topics to their ends asked after
that init: every checkpoint an offset it reads stands on was committed before that init, so
its state records are in the catalog.

An offset missing (none committed yet, expired after the broker's `offsets.retention.minutes`
without a checkpoint of the partition, or unreadable) costs a longer scan, never state.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from confluent_kafka import TopicPartition

from adapter.log.errors import LogUnavailable
from adapter.log.scanner import PartitionScanner
from adapter.tasks import Kind, Tasks

log = logging.getLogger(__name__)

ROLE = "covered"  # the group `{topic_prefix}covered`, and its consumer's log and statistics
Place = tuple[str, int]  # a bucket topic's partition


@dataclass(frozen=True)
class Covered:
    """Every committed record of the partition below `offset` is in its stream's state
    records; `incarnation` is the bucket's creation time (its `created_at_ms`)."""

    offset: int
    incarnation: int


class CoveredOffsets:
    """The covered offsets, kept as the group's committed offsets by `scanner`'s consumer."""

    def __init__(self, scanner: PartitionScanner) -> None:
        self.scanner = scanner
        self._marked: dict[Place, Covered] = {}  # the highest committed here, per partition
        self._tasks = Tasks()  # the marks under way (`mark_soon`)

    def mark_soon(self, covered: dict[Place, Covered]) -> None:
        """`mark` in the background: a checkpoint, and a tier pass's flush waiting on one,
        go on at once (each commit round trip inside the flush's loop let more appends be
        noted before it looked again, until its deadline passed)."""
        self._tasks.spawn(self.mark(covered), "covered offsets", Kind.JOB)

    async def mark(self, covered: dict[Place, Covered]) -> None:
        """Commit what moved past what this instance committed before; a failure is logged
        and left to the next pass (a lower offset costs a longer scan only)."""
        moved = {
            place: mark
            for place, mark in covered.items()
            if (known := self._marked.get(place)) is None or _after(mark, known)
        }
        if not moved:
            return
        offsets = [
            TopicPartition(topic, partition, mark.offset, metadata=str(mark.incarnation))
            for (topic, partition), mark in sorted(moved.items())
        ]
        try:
            await self.scanner.commit(offsets)
        except LogUnavailable as error:
            log.warning("covered offsets not committed, at the next checkpoint: %s", error)
            return
        self._marked.update(moved)

    async def read(self, places: dict[Place, int]) -> dict[Place, int]:
        """The covered offset of each partition of `places` (its bucket's incarnation) that has
        one for that incarnation; none at all when Kafka does not answer (logged)."""
        if not places:
            return {}
        asked = [TopicPartition(topic, partition) for topic, partition in sorted(places)]
        try:
            found = await self.scanner.committed(asked)
        except LogUnavailable as error:
            log.warning("covered offsets not read, scanning from the streams' tails: %s", error)
            return {}
        return {
            (part.topic, part.partition): part.offset
            for part in found
            if part.error is None
            and part.offset >= 0
            and part.metadata == str(places.get((part.topic, part.partition)))
        }

    async def close(self) -> None:
        await self._tasks.close()  # a mark cancelled leaves a lower offset: a longer scan
        await self.scanner.close()


def _after(mark: Covered, known: Covered) -> bool:
    """Whether `mark` says more than `known`: further on, or of a later incarnation."""
    return (mark.incarnation, mark.offset) > (known.incarnation, known.offset)
