"""Per-slot checkpoints: the state of a write slot's streams whose commits wrote none, written
by the slot's owner every `slot_checkpoint_ms` and when it hands the slot over.

From format level 7 a pure append (one whose only changes are the tail, message count,
Stream-Seq, last write and access and its producer's state) commits its data record alone
(`decided_writes.py`); its stream is noted here, by slot, with the producers whose states it
moved. A pass writes each noted stream's `StreamMeta` and those producers' records, as the
catalog holds them, in one transaction of the slot's writer (fenced like any write of the
slot): the compacted meta and producers topics then take a record per stream per interval at
most, not one per append. A new owner starts from these records and carries each stream forward
over its records after them (`state/slot_takeover.py`), so a pass that never ran (a crash)
costs a longer scan, never state.

A stream with a write in flight that writes its own state record (a close, a trim, a
deletion's tombstone) is left for the next pass: a checkpoint record landing after that one
would be what compaction keeps. Pure appends in flight do not hold a stream back: they write
no state record, and their data lies past the tail the checkpoint writes, where the next
owner's scan reads it, so a stream appended to without a pause is checkpointed all the same.
At a hand-over the slot's writer has drained first, so every noted stream is written.

Before Kafka frees any of a slot's records (a tier range or a retention floor committed,
`service/tiering.py`), the slot's noted streams and every stream whose records the range
holds are written (`flush`): every stream's tail as its metadata shows it is then at or past
each of its records freed, so whoever learns the stream from its metadata and the records
Kafka still holds (a new owner, a reader on another instance) misses none of them. (A stream
is not always noted. A stream the catalog holds ahead of its last state record, its tail
learned from the data log by a reader here before this instance took the slot or moved by
appends whose hand-over could not write them, is noted whole at the takeover
(`state/unrecorded.py`, `state/slot_takeover.py`).)

Each pass also tells, once its transaction has committed, how far each partition it wrote for
is covered (`CheckpointNotes.covered`, `state/covered_offsets.py`): the offset below which
every record is in its stream's state records, where the next owner's scan may start. A stream
still noted (busy, or taken by a pass not written yet) holds it back to the first of its
records no state record shows.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from adapter.log.errors import LogUnavailable
from adapter.log.writer import StateEntry, WriteBatch
from adapter.service.background import RIDDEN_OUT
from adapter.service.interfaces import SlotWriting
from adapter.service.state_entries import producer_entry, stream_entry
from adapter.state.catalog import Catalog
from adapter.state.covered_offsets import Covered, CoveredOffsets, Place
from topology.naming import StateTopics

log = logging.getLogger(__name__)

StreamKey = tuple[str, str]
FLUSH_RETRY_S = 0.05  # between two tries of a flush waiting for writes in flight


@dataclass
class Note:
    """A stream to write: the producers whose states its commits moved, and where in its
    partition the records no state record shows may lie: none below `first` (0: not known),
    none of a commit noted here past `last` (-1: none known)."""

    producers: set[str] = field(default_factory=set)
    first: int = 0
    last: int = -1

    def add(self, other: Note) -> None:
        self.producers.update(other.producers)
        self.first = min(self.first, other.first)
        self.last = max(self.last, other.last)


Noted = dict[StreamKey, Note]  # a slot's streams to write


class CheckpointNotes:
    """The streams of each owned slot whose state no record shows yet, and their records."""

    def __init__(self, catalog: Catalog, topics: StateTopics) -> None:
        self.catalog = catalog
        self.topics = topics
        self._noted: dict[int, Noted] = {}
        self._taken: dict[int, list[Noted]] = {}  # taken by checkpoints being written

    def changed(
        self, slot: int, key: StreamKey, producer_id: str | None, first: int = 0, last: int = -1
    ) -> None:
        """A commit moved the stream's state (and `producer_id`'s) without writing it: its
        records that no state record shows lie from `first` (0: not known) to `last` (-1:
        not known), in its partition."""
        producers = {producer_id} if producer_id is not None else set()
        self._note(slot, key, Note(producers, first, last))

    def whole(self, slot: int, key: StreamKey) -> None:
        """The stream and every producer state of it are to be written."""
        self._note(slot, key, Note(set(self.catalog.producer_states(*key))))

    def _note(self, slot: int, key: StreamKey, note: Note) -> None:
        noted = self._noted.setdefault(slot, {})
        held = noted.get(key)
        if held is None:
            noted[key] = note
        else:
            held.add(note)

    def forget(self, key: StreamKey) -> None:
        """The stream is gone (its tombstones are written): nothing of it to checkpoint."""
        for noted in self._noted.values():
            noted.pop(key, None)

    def slots(self) -> list[int]:
        return sorted(slot for slot, noted in self._noted.items() if noted)

    def pending(self, slot: int) -> int:
        """How many of the slot's streams await a checkpoint."""
        return len(self._noted.get(slot, {}))

    def hand_over(self, slot: int) -> list[StateEntry]:
        """Every noted stream's records, the slot's notes dropped: it moves to another owner
        (its writer drained: nothing is in flight)."""
        self._taken.pop(slot, None)
        return self.entries(self._noted.pop(slot, {}))

    def producers_of(self, slot: int, key: StreamKey) -> set[str]:
        """The producers whose states of the stream no record shows yet (noted, or taken by
        a checkpoint not written yet)."""
        found: set[str] = set()
        for noted in (self._noted.get(slot, {}), *self._taken.get(slot, ())):
            note = noted.get(key)
            if note is not None:
                found.update(note.producers)
        return found

    def take(self, slot: int, busy: Callable[[StreamKey], bool]) -> Noted:
        """The slot's noted streams that are not `busy`, noted no more (taken, until the
        checkpoint is `written` or they are noted again)."""
        noted = self._noted.get(slot, {})
        taken = {key: note for key, note in noted.items() if not busy(key)}
        for key in taken:
            del noted[key]
        self._taken.setdefault(slot, []).append(taken)
        return taken

    def written(self, slot: int, taken: Noted) -> None:
        """The streams `taken` are checkpointed."""
        writing = self._taken.get(slot, [])
        self._taken[slot] = [other for other in writing if other is not taken]

    def note_again(self, slot: int, taken: Noted) -> None:
        """Streams taken whose checkpoint was not written."""
        self.written(slot, taken)
        for key, note in taken.items():
            self._note(slot, key, note)

    def entries(self, noted: Noted) -> list[StateEntry]:
        """The streams' records as the catalog holds them now (a stream gone: none)."""
        entries: list[StateEntry] = []
        for key, note in noted.items():
            meta = self.catalog.stream(*key)
            if meta is None:
                continue
            entries.append(stream_entry(self.topics, meta))
            states = self.catalog.producer_states(*key)
            for producer_id in sorted(note.producers):
                record = states.get(producer_id)
                if record is not None:
                    entries.append(producer_entry(self.topics, record))
        return entries

    def covered(self, slot: int, taken: Noted) -> dict[Place, Covered]:
        """Where every committed record of a partition is in its stream's state records once
        the checkpoint of `taken` (just taken) commits, for each partition it reaches past
        (`state/covered_offsets.py`): past its last record noted here, below the first record
        of any stream still noted or taken by a checkpoint not written yet.

        Below `last + 1` of a stream taken, every record was committed before that record's
        commit was noted: the slot's commits are noted in commit order, each after the one
        before it, and the records before this owner's came from the previous owners, which
        the takeover either found in their streams' state records or noted, from the tail
        those show. So each is in a state record already, or in this checkpoint, or of a
        stream still noted or being checkpointed: those hold the offset back."""
        reached: dict[Place, Covered] = {}
        for key, note in taken.items():
            found = self._place(key)
            if found is None or note.last < 0:
                continue
            place, incarnation = found
            held = reached.get(place)
            if held is None or held.offset <= note.last:
                reached[place] = Covered(note.last + 1, incarnation)
        others = [other for other in self._taken.get(slot, ()) if other is not taken]
        for noted in (self._noted.get(slot, {}), *others):
            for key, note in noted.items():
                found = self._place(key)
                held = None if found is None else reached.get(found[0])
                if found is not None and held is not None and note.first < held.offset:
                    reached[found[0]] = Covered(note.first, held.incarnation)
        return reached

    def _place(self, key: StreamKey) -> tuple[Place, int] | None:
        """The partition holding the stream's records, with its bucket's creation time; None
        for a stream or bucket gone."""
        meta = self.catalog.stream(*key)
        bucket = None if meta is None else self.catalog.bucket(meta.data_bucket)
        if meta is None or bucket is None:
            return None
        return (bucket.topic, meta.partition), bucket.created_at_ms


class SlotCheckpoints:
    """Writes the notes of each slot owned here every `interval_s`."""

    def __init__(
        self,
        notes: CheckpointNotes,
        writers: SlotWriting,
        interval_s: float,
        busy: Callable[[StreamKey], bool] = lambda _key: False,
        flush_within_s: float = 30.0,
        covered: CoveredOffsets | None = None,
    ) -> None:
        self.notes = notes
        self.writers = writers
        self.interval_s = interval_s
        self.busy = busy  # whether a write of the stream is in flight
        self.flush_within_s = flush_within_s
        self.covered = covered  # where a checkpoint written leaves each partition covered

    async def run(self) -> None:
        """A pass every interval until cancelled; a slot whose pass failed is tried again at
        the next (its streams stay noted)."""
        while True:
            await asyncio.sleep(self.interval_s)
            for slot in self.notes.slots():
                try:
                    await self.write(slot)
                except RIDDEN_OUT as error:
                    log.warning("write slot %d: checkpoint not written, next time: %s", slot, error)

    async def write(self, slot: int) -> int:
        """Write the slot's noted streams not being written now; how many were written."""
        if not self.writers.accepting(slot):
            return 0  # moving: handed over (`SlotWriters.lose`), or renewed and kept
        taken = self.notes.take(slot, self.busy)
        entries = self.notes.entries(taken)
        covered = self.notes.covered(slot, taken)
        if not entries:
            self.notes.written(slot, taken)
            return 0
        try:
            batch = self.writers.enqueue(slot, WriteBatch([], lambda _offsets: entries))
            await asyncio.shield(batch.future)
        except BaseException:
            self.notes.note_again(slot, taken)
            raise
        self.notes.written(slot, taken)
        if self.covered is not None and covered:
            self.covered.mark_soon(covered)  # only once the records it stands on committed
        return len(taken)

    async def flush(self, slot: int, streams: list[StreamKey]) -> None:
        """Write every noted stream of the slot and every one of `streams` (of the slot: those
        whose records are about to be freed, noted or not: see the module's docstring),
        waiting out the writes in flight of busy ones. LogUnavailable when they are not all
        written within `flush_within_s`, or the slot is not written here: then nothing of the
        slot is to be freed."""
        for key in streams:
            self.notes.whole(slot, key)
        deadline = asyncio.get_running_loop().time() + self.flush_within_s
        while True:
            if not self.writers.accepting(slot):
                raise LogUnavailable(f"write slot {slot} is not written here: no checkpoint")
            await self.write(slot)
            left = self.notes.pending(slot)
            if not left:
                return
            if asyncio.get_running_loop().time() > deadline:
                raise LogUnavailable(
                    f"write slot {slot}: {left} streams not checkpointed within "
                    f"{self.flush_within_s:.0f} s (writes of theirs in flight)"
                )
            await asyncio.sleep(FLUSH_RETRY_S)
