"""The collector of the cold tier: chunks no stream can read any more, and their objects.

Two steps, like the snapshot collector's:

1. *Unlist* (by the owner of each partition's write slot, with its producer): a range of a
   bucket that no longer exists (deleted, or deleted and created again: another
   `created_at_ms`) is tombstoned; a chunk no stream needs is marked collected in its range's
   record (listed without its object, so a reader still at its offsets gets 410, never an
   empty answer). A stream needs a chunk when it, or a fork of it (recursively), has a range
   of its history with the chunk's stream id that overlaps the chunk at or after the offset
   `needed_from` gives: its earliest retained offset once its snapshot has been visible for
   the grace period (a reader that began before the snapshot has that long, as in Kafka),
   else its history's start. Deleted streams and streams re-created since need nothing.
2. *Delete* (any instance): an object under `tier/` that no listed chunk names, seen so for a
   whole grace period with the catalog caught up. A reader that took a range's record before
   step 1 has that long to finish. Chunk keys are unique per attempt at a range, and an
   attempt commits its record within half the grace period of its first put or not at all
   (`TierWorker`), so an object judged an orphan is one no manifest lists or ever will; the
   argument, late deletes included, is in docs/explanation/cold-tier.md ("Why the sweep never
   deletes a listed chunk").
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace

from adapter.cluster.slot_writers import SlotWriters
from adapter.objects.base import ObjectStore
from adapter.protocol.model import StreamMeta
from adapter.protocol.snapshots import needed_from
from adapter.service.snapshot_gc import OrphanSweep, collect_forever
from adapter.state.catalog import Catalog
from adapter.tier import chunks, manifest
from adapter.tier.manifest import TierChunk, TierRange
from topology.naming import bucket_of_topic
from topology.slots import SlotMap
from topology.wire import owner_of_key

log = logging.getLogger(__name__)


def needed(catalog: Catalog, bucket_id: str, chunk: TierChunk, settled_before_ms: int) -> bool:
    """Whether any stream can still read a message of the chunk: from its earliest retained
    offset once its snapshot was published before `settled_before_ms`, else from the start
    of its history (`needed_from`: a reader that began before a newer snapshot may still be
    going, as Kafka keeps the records below it for as long)."""
    for meta in _readers(catalog, bucket_id, chunk.stream_id):
        first = needed_from(meta, catalog.snapshot(meta), settled_before_ms)
        for segment in meta.segments():
            start = max(segment.start, first)
            if segment.stream_id != chunk.stream_id:
                continue
            if start <= chunk.last_offset and chunk.first_offset < segment.end:
                return True
    return False


def _readers(catalog: Catalog, bucket_id: str, record_id: str) -> list[StreamMeta]:
    """The stream whose records of `bucket_id`'s topic are keyed `record_id`, its forks (of
    any bucket), their forks, and so on."""
    found: list[StreamMeta] = []
    key = owner_of_key(bucket_id, record_id)
    own = catalog.stream(*key)
    if own is not None:
        found.append(own)
    frontier, seen = [key], {key}
    while frontier:
        for fork in catalog.forks_of(*frontier.pop()):
            fork_key = (fork.bucket_id, fork.stream_id)
            if fork_key not in seen:
                seen.add(fork_key)
                found.append(fork)
                frontier.append(fork_key)
    return found


class TierCollector:
    def __init__(
        self,
        catalog: Catalog,
        writers: SlotWriters,
        slots: SlotMap,
        store: ObjectStore,
        tier_topic: str,
        caught_up: Callable[[], Awaitable[None]],
        clock: Callable[[], int],
        grace_ms: int,
        interval_s: float,
    ) -> None:
        self.catalog = catalog
        self.writers = writers
        self.slots = slots
        self.tier_topic = tier_topic
        self.interval_s = interval_s
        self.clock = clock
        self.grace_ms = grace_ms
        self.sweep = OrphanSweep(store, chunks.OBJECT_PREFIX, caught_up, clock, grace_ms)

    async def run(self) -> None:
        await collect_forever(self.collect_once, self.interval_s, "cold tier")

    async def collect_once(self) -> tuple[int, list[str]]:
        """One pass: (range records rewritten or tombstoned, objects deleted)."""
        listing = await self.sweep.begin()
        changed = 0
        settled_before = self.clock() - self.grace_ms
        for place in self.catalog.tier.places():
            bucket_id = bucket_of_topic(self.slots.prefix, place.topic)
            if bucket_id is None:
                continue
            slot = self.slots.of_stream(bucket_id, place.partition)
            if self.writers.accepting(slot):
                for tier_range in self.catalog.tier.ranges(place):
                    changed += await self._unlist(bucket_id, slot, tier_range, settled_before)
        listed = {
            chunk.object_key
            for place in self.catalog.tier.places()
            for tier_range in self.catalog.tier.ranges(place)
            for chunk in tier_range.stored
        }
        doomed = await self.sweep.finish(listing, listed)
        if changed or doomed:
            log.info("cold tier: %d ranges rewritten, %d objects deleted", changed, len(doomed))
        return changed, doomed

    async def _unlist(
        self, bucket_id: str, slot: int, tier_range: TierRange, settled_before_ms: int
    ) -> int:
        bucket = self.catalog.bucket(bucket_id)
        if bucket is None or bucket.created_at_ms != tier_range.bucket_created_at_ms:
            await self._commit(slot, (self.tier_topic, tier_range.key, None))
            self.catalog.tier.drop(tier_range.place, tier_range.start)
            return 1
        kept = tuple(
            c
            if c.collected or needed(self.catalog, bucket_id, c, settled_before_ms)
            else c.as_collected()
            for c in tier_range.chunks
        )
        if kept == tier_range.chunks:
            return 0
        smaller = replace(tier_range, chunks=kept)
        await self._commit(slot, (self.tier_topic, smaller.key, manifest.encode(smaller)))
        self.catalog.tier.put(smaller)
        return 1

    async def _commit(self, slot: int, entry: tuple[str, str, bytes | None]) -> None:
        await self.writers.submit(slot, [], lambda _offsets: [entry])
