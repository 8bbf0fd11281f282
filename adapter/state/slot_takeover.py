"""What a write slot's new owner does before it takes the slot's writes: every stream of the
slot's partitions carried forward from the catalog (its last metadata and producer records)
over the partitions' committed records after it (`state/stream_recovery.py`), and what that
changed put in the catalog.

A previous owner's commit may have left its data records without the state records that say
what they did (a slot's state is written by checkpoint, not by every append): without this,
the new owner would decide at a tail short of what was written, and take a retried append of
an idempotent producer for a new one. Run after the new producer's init (every earlier
holder's transactions are over, committed or aborted) and after the catalog has followed the
state topics to their ends; nothing writes the slot's streams meanwhile.

Each partition is scanned from the lowest tail among its streams that lie below its end, but
no lower than its log start (records retention removed are gone for every reader) nor than its
covered offset, when one is committed (`state/covered_offsets.py`: below it every record is in
its stream's state records, so a stream quiet since long ago does not make the scan read all
its busy neighbours appended since).

A stream the catalog holds ahead of its last state record already (`state/unrecorded.py`: its
tail learned here from its records while another instance wrote it, or moved by this
instance's own appends when it last held the slot and its hand-over could not write them) is
told too, whole (every producer state of it), though the scan finds nothing new: no record
shows that state, and no one else will write it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from adapter.log.scanner import PartitionScanner
from adapter.protocol.model import StreamMeta
from adapter.protocol.stream_log import StreamState
from adapter.state.catalog import Catalog, newer
from adapter.state.covered_offsets import CoveredOffsets, Place
from adapter.state.stream_recovery import recover_counted, stream_key
from topology.naming import bucket_of_topic, bucket_topic
from topology.slots import SlotMap

log = logging.getLogger(__name__)

# A stream carried forward: its slot, its key, the producers whose states moved, and where in
# its partition the records no state record shows lie (from, to: 0 when the start is unknown).
Changed = Callable[[int, tuple[str, str], list[str], int, int], None]
# A slot's streams with their states, by the partition holding their records.
Places = dict[tuple[str, int], dict[bytes, StreamState]]
STEP = 512  # streams looked at between two turns of the event loop


@dataclass(frozen=True)
class Recovered:
    """What a slot's recovery found: streams looked at, records read, streams changed, and
    streams that were ahead of their state records before it."""

    streams: int = 0
    records: int = 0
    changed: int = 0
    unrecorded: int = 0

    def __add__(self, other: Recovered) -> Recovered:
        return Recovered(
            self.streams + other.streams,
            self.records + other.records,
            self.changed + other.changed,
            self.unrecorded + other.unrecorded,
        )


class SlotTakeover:
    """Carries a gained slot's streams forward in `catalog`; `on_changed` hears of each stream
    whose state moved (its hot tail and live readers know nothing of those records, and no
    state record shows it: the slot's next checkpoint is to write it), and of each one that was
    ahead of its state records already, with every producer of it."""

    def __init__(
        self,
        catalog: Catalog,
        scanner: PartitionScanner,
        slots: SlotMap,
        on_changed: Changed = lambda _slot, _key, _producers, _first, _last: None,
        covered: CoveredOffsets | None = None,
    ) -> None:
        self.catalog = catalog
        self.scanner = scanner
        self.slots = slots
        self.on_changed = on_changed
        self.covered = covered  # None: every scan starts from its streams' tails

    async def recover(self, slots: list[int]) -> None:
        """Carry every stream of `slots` forward (LogUnavailable: a partition could not be
        read; the slots are then not to take writes)."""
        began = time.monotonic()
        by_slot = await self._partitions(set(slots))
        covered = await self._covered(by_slot)
        listed_ms = (time.monotonic() - began) * 1000
        for slot in slots:
            began = time.monotonic()
            found = Recovered()
            for (topic, partition), states in by_slot.get(slot, {}).items():
                floor = covered.get((topic, partition), 0)
                found += await self._partition(slot, topic, partition, states, floor)
            log.info(
                "write slot %d: %d streams carried forward over %d records (%d changed) in "
                "%.0f ms (the catalog's streams listed and covered offsets read in %.0f ms, "
                "%d of %d partitions covered); %d ahead of their state records",
                slot,
                found.streams,
                found.records,
                found.changed,
                (time.monotonic() - began) * 1000,
                listed_ms,
                sum(place in covered for place in by_slot.get(slot, {})),
                len(by_slot.get(slot, {})),
                found.unrecorded,
            )

    async def _covered(self, by_slot: dict[int, Places]) -> dict[Place, int]:
        """The covered offset of each partition that has one for its bucket's incarnation."""
        if self.covered is None:
            return {}
        incarnations: dict[Place, int] = {}
        for places in by_slot.values():
            for place in places:
                bucket = self.catalog.bucket(bucket_of_topic(self.slots.prefix, place[0]) or "")
                if bucket is not None:
                    incarnations[place] = bucket.created_at_ms
        return await self.covered.read(incarnations)

    async def _partitions(self, slots: set[int]) -> dict[int, Places]:
        """The streams of `slots` with their states, by slot and by the partition holding
        their records: one pass over the catalog, the event loop let run every `STEP`."""
        found: dict[int, Places] = {}
        for count, (bucket_id, meta) in enumerate(self._streams()):
            if count % STEP == STEP - 1:
                await asyncio.sleep(0)
            slot = self.slots.of_stream(bucket_id, meta.partition)
            if slot not in slots or meta.soft_deleted:
                continue
            state = StreamState(meta, self.catalog.producers(meta.bucket_id, meta.stream_id))
            place = (bucket_topic(self.slots.prefix, bucket_id), meta.partition)
            found.setdefault(slot, {}).setdefault(place, {})[stream_key(state)] = state
        return found

    def _streams(self) -> Iterator[tuple[str, StreamMeta]]:
        """Every stream with the bucket whose topic holds its records."""
        for bucket_id in self.catalog.bucket_ids():
            for meta, _pointer in self.catalog.streams_in_topic(bucket_id):
                yield bucket_id, meta

    async def _partition(
        self, slot: int, topic: str, partition: int, states: dict[bytes, StreamState], covered: int
    ) -> Recovered:
        log_start, end = await self.scanner.watermarks(topic, partition)
        if covered > end:  # never: a topic made again under the name has another incarnation
            log.warning(
                "%s[%d]: covered offset %d past the end %d, not used",
                topic,
                partition,
                covered,
                end,
            )
            covered = 0
        behind = {key: s for key, s in states.items() if s.meta.next_offset < end}
        floor = max(log_start, covered)
        recovered = await recover_counted(self.scanner, topic, partition, behind, floor)
        found = Recovered(len(states), recovered.scanned)
        for record_key, before in states.items():
            after = recovered.states.get(record_key, before)
            if after is not before or _key(before) in self.catalog.unrecorded:
                found += self._settle(slot, before, after, end)
        return found

    def _settle(
        self, slot: int, before: StreamState, after: StreamState | None, end: int
    ) -> Recovered:
        """Put in the catalog what the stream's records changed, and tell `on_changed` what no
        state record shows: what they moved (from the tail its state showed), or the whole
        stream when it was ahead of its records already (from a start not known), up to the
        partition's `end` as scanned. What it counts for: changed, unrecorded."""
        key = _key(before)
        unrecorded = key in self.catalog.unrecorded and after is not None
        changed = self._apply(before, after)
        moved = list(self.catalog.producer_states(*key)) if unrecorded else changed
        if moved is not None:
            first = 0 if unrecorded else before.meta.next_offset
            self.on_changed(slot, key, moved, first, end - 1)
        return Recovered(changed=int(changed is not None), unrecorded=int(unrecorded))

    def _apply(self, before: StreamState, after: StreamState | None) -> list[str] | None:
        """Put in the catalog what the stream's records changed: the producers whose states
        they moved, or None when they changed nothing."""
        if after is None or after == before:
            return None  # None: deleted or made anew since, which its metadata record says
        meta = after.meta
        key = (meta.bucket_id, meta.stream_id)
        if after.meta != before.meta:
            self.catalog.put_stream(newer(self.catalog.stream(*key), meta))
        known = self.catalog.producer_states(*key)
        moved = []
        for producer_id, record in after.producers.items():
            held = known.get(producer_id)
            if held is None or (record.epoch, record.last_seq) > (held.epoch, held.last_seq):
                self.catalog.put_producer(record)
                moved.append(producer_id)
        self.catalog.unrecorded.moved(key)  # until the checkpoint it is told of is written
        return moved


def _key(state: StreamState) -> tuple[str, str]:
    return state.meta.bucket_id, state.meta.stream_id
