"""Where Kafka may free a bucket partition: the offset its `DeleteRecords` is given.

One rule, used by the tier worker after every committed range and at the start of every pass
(to finish a freeing a crash interrupted), and meant for retention too: Kafka may drop every
record below the end of the partition's last committed tiered range (each is readable from
chunks, `TierIndex.covering`), or below the point under which no stream needs anything at
all (snapshot retention, deleted streams: computed by the caller), whichever is further.
Freeing past the tiered end is safe for the tier: the next range starts at Kafka's log start,
and the gap it leaves in the manifest holds only records no reader is given.
"""

from __future__ import annotations

from adapter.tier.manifest import Place, TierIndex


def free_to(index: TierIndex, place: Place, unneeded_below: int | None = None) -> int | None:
    """The offset below which Kafka may free the partition, or None when nothing may go."""
    tiered = index.tiered_to(place)
    candidates = [offset for offset in (tiered, unneeded_below) if offset is not None]
    return max(candidates) if candidates else None


def to_free(
    index: TierIndex, place: Place, log_start: int, unneeded_below: int | None = None
) -> int | None:
    """`free_to` when it is past Kafka's log start (a DeleteRecords to make), else None."""
    target = free_to(index, place, unneeded_below)
    return target if target is not None and target > log_start else None
