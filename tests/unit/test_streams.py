"""The stream driver (`adapter/service/streams.py`) over an in-memory log: the machine's random
histories, run concurrently through the real `StreamService`, while the log commits, fails,
expires or loses the answer of its batches as drawn.

The model is the machine itself over what committed: each committed batch must be what the
machine decides for its command on the state every earlier commit left (so no batch commits
on a state that never was, and commits apply in order), and every read through the service
must give the messages of that history, at their offsets. An append answered 503 is never
visible, one answered 504 turns out committed or not, and the catalog the driver moved is the
one its committed state records rebuild.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sized
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapter.http.statuses import status_of
from adapter.log.errors import LogUnavailable, OutcomeUnknown
from adapter.log.hot_cache import HotCache
from adapter.log.reader import ReadLimits
from adapter.log.writer import StateEntry, WriteBatch
from adapter.objects.local import LocalObjectStore
from adapter.protocol import stream_machine as machine
from adapter.protocol.commands import Appended, Created, CreateStream, DeleteStream, Read
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.model import ProducerRecord, StreamMeta
from adapter.protocol.offsets import BEGINNING, ReadFrom
from adapter.protocol.producers import ProducerPosition
from adapter.protocol.stream_log import StreamState, carry_forward, logged_in_full, logged_record
from adapter.service.hub import LiveHub
from adapter.service.reads import ReadPath
from adapter.service.record_encoding import write_records
from adapter.service.state_entries import write_entries
from adapter.service.streams import StreamService
from adapter.state.catalog import Catalog
from adapter.state.format_gate import GATE
from adapter.state.records import decode, decode_as
from adapter.state.view_age import ViewAge
from adapter.tier.cold import ColdReader
from tests.unit.support.histories import LONG_COMMANDS, REF, Command, append, create
from tests.unit.support.memory_log import (
    TOPICS,
    Fate,
    MemoryBuckets,
    MemoryReader,
    MemoryWriters,
    Outcome,
)
from topology.internal_records import APPENDS_ALONE_LEVEL
from topology.placement import partition_for
from topology.wire import stream_key

NOW = 1_000_000
MACHINE = machine.Machine()
KEY = (REF.bucket_id, REF.stream_id)
PARTITIONS = 3
# Small reads: a stream's history comes in many chunks, each continued from the offset the
# last one ended at.
READ_LIMITS = ReadLimits(max_read_bytes=3, max_scan_bytes=1 << 20, timeout_s=1.0)


# -- what the log does between commands ------------------------------------------------------


@dataclass(frozen=True)
class Transact:
    """Take up to `count` queued batches into one transaction and end it as `fate` says."""

    count: int
    fate: Fate


@dataclass(frozen=True)
class Take:
    """Take up to `count` queued batches into a transaction, ended by a later `End`."""

    count: int


@dataclass(frozen=True)
class End:
    """End the transaction taken: commit, fail, or lose the answer."""

    fate: Fate


@dataclass(frozen=True)
class Expire:
    """The `count` oldest queued batches time out, unwritten."""

    count: int


@dataclass(frozen=True)
class Learn:
    """The outcome of the transaction answered 504 is learned."""

    happened: bool


LogStep = Transact | Take | End | Expire | Learn
FATES = st.sampled_from([Fate.COMMIT, Fate.COMMIT, Fate.COMMIT, Fate.FAIL, Fate.UNKNOWN])
LOG_STEPS = st.one_of(
    st.builds(Transact, st.integers(1, 4), FATES),
    st.builds(Transact, st.integers(1, 4), FATES),
    st.builds(Take, st.integers(1, 3)),
    st.builds(End, FATES),
    st.builds(Expire, st.integers(1, 2)),
    st.builds(Learn, st.booleans()),
)
# What the log does after each command of the history (none: the appends pile up).
SCHEDULES = st.lists(st.lists(LOG_STEPS, max_size=3), max_size=60)


def _act(writers: MemoryWriters, step: LogStep) -> None:
    if isinstance(step, Transact):
        writers.take(step.count)
        writers.end(step.fate)
    elif isinstance(step, Take):
        writers.take(step.count)
    elif isinstance(step, End):
        writers.end(step.fate)
    elif isinstance(step, Expire):
        writers.expire(step.count)
    else:
        writers.learn(step.happened)


async def _idle() -> None:
    """Let every task run until each waits (on the log, a lock or a far timer): until nothing
    but this coroutine is ready on the loop. asyncio has no public call for it; CPython's loop
    keeps its ready callbacks in `_ready`."""
    ready: Sized = asyncio.get_running_loop()._ready  # type: ignore[attr-defined]
    await asyncio.sleep(0)
    while ready:  # noqa: ASYNC110 (no event says "every other task waits": yield until so)
        await asyncio.sleep(0)


# -- the model: the machine over what committed --------------------------------------------


@dataclass
class _Model:
    """The stream as the machine leaves it after every committed write, in commit order."""

    topic: str
    partition: int
    meta: StreamMeta | None = None
    producers: dict[str, ProducerPosition] = field(default_factory=dict)
    messages: list[tuple[int, bytes]] = field(default_factory=list)  # (offset, body)
    unrecorded: set[str] = field(default_factory=set)  # producers moved by pure appends only

    def decide(self, command: Command) -> machine.Step:
        view = machine.View(self.meta, dict(self.producers))
        if command is None:
            return MACHINE.apply(view, DeleteStream(REF), NOW)
        if isinstance(command, CreateStream):
            return MACHINE.apply(replace(view, partition=self.partition), command, NOW)
        return MACHINE.apply(view, command, NOW)

    def commit(
        self, command: Command, batch: WriteBatch, offsets: list[int], state: list[StateEntry]
    ) -> None:
        write = self.decide(command)
        assert isinstance(write, machine.Write), (
            f"{command} committed, but on the history committed before it the machine says {write}"
        )
        content_type = write.state.content_type if write.state is not None else ""
        records = write_records(self.topic, self.partition, REF.stream_id, content_type, write)
        assert batch.records == records, f"{command} committed other records than decided"
        settled = machine.settle(write, offsets)
        # From format level 7 a pure append's records carry its state: it commits no other.
        alone = GATE.level >= APPENDS_ALONE_LEVEL and logged_in_full(write)
        expected = _readable([] if alone else write_entries(TOPICS, KEY, write, settled))
        committed = _readable(state)
        assert committed[: len(expected)] == expected, f"{command} committed another state"
        for producer_id in write.forget:
            self.producers.pop(producer_id, None)
            self.unrecorded.discard(producer_id)
        if write.producer is not None:
            self.producers[write.producer[0]] = write.producer[1]
        # Past its own, a write that records the stream records the producers its pure
        # appends before it moved (at their states now): a next owner starts from its tail.
        extra = {
            key.partition("\0")[2]: record for _topic, key, record in committed[len(expected) :]
        }
        for producer_id, record in extra.items():
            assert isinstance(record, ProducerRecord), f"{command} committed {record}"
            known = self.producers[producer_id]
            assert (record.epoch, record.last_seq) == (known.epoch, known.last_seq), command
        if alone and write.producer is not None:
            self.unrecorded.add(write.producer[0])
        elif not alone:
            own = {write.producer[0]} if write.producer is not None else set()
            left = self.unrecorded - own - extra.keys()
            assert write.state is None or not left, f"{command} left {left} unrecorded"
            self.unrecorded = set()
        if write.creates or settled is None:
            self.messages = []
        self.messages += zip(machine.message_offsets(write, offsets), write.messages, strict=True)
        self.meta = settled


def _readable(entries: list[StateEntry]) -> list[tuple[str, str, object]]:
    """State records decoded, so a difference reads as one of fields."""
    return [
        (topic, key, None if value is None else _decoded(topic, key, value))
        for topic, key, value in entries
    ]


def _decoded(topic: str, key: str, value: bytes) -> object:
    if topic == TOPICS.producers:
        return decode_as(ProducerRecord, key, value)
    return decode(key, value)


# -- the driver under test -------------------------------------------------------------------


class _Run:
    def __init__(self) -> None:
        self.catalog = Catalog()
        self.buckets = MemoryBuckets(self.catalog)
        bucket = self.buckets.add(REF.bucket_id, PARTITIONS)
        self.writers = MemoryWriters()
        reads = ReadPath(
            MemoryReader(self.writers, READ_LIMITS),
            HotCache(1 << 20),
            ColdReader(LocalObjectStore(Path("never-read")), 0),  # nothing is tiered here
            self.catalog,
        )
        current = ViewAge(1.0, clock=lambda: 0.0)  # one log, nothing to follow: always current
        current.reached(0.0)
        self.now = NOW  # what the service's clock says
        self.service = StreamService(
            self.catalog, self.writers, self.buckets, reads, LiveHub(), current, clock=self.clock
        )
        partition = partition_for(stream_key(REF.stream_id), PARTITIONS)
        self.model = _Model(bucket.topic, partition)
        self.tasks: dict[asyncio.Task[object], Command] = {}
        self.followed = 0  # commits the model has applied

    def clock(self) -> int:
        return self.now

    def close(self) -> None:
        """Take every answer (a failed run leaves some unread, which asyncio would log)."""
        for task in self.tasks:
            if task.done() and not task.cancelled():
                task.exception()

    def issue(self, command: Command) -> None:
        """Start the command; it runs until it waits, and is answered when the log says."""
        if command is None:
            task: asyncio.Task[object] = asyncio.create_task(self.service.delete(REF))
        elif isinstance(command, CreateStream):
            task = asyncio.create_task(self.service.create(command))
        else:
            task = asyncio.create_task(self.service.native.append(command))
        self.tasks[task] = command

    async def drain(self, fates: list[Fate], learned: bool) -> None:
        """Let the log end all that is queued: a batch at a time as `fates` say, then the rest
        committed together (an outcome being learned: as `learned` says)."""
        left = iter(fates)
        await _idle()
        while self.writers.busy():
            if self.writers.open is not None:
                self.writers.learn(learned)
            elif self.writers.taken is not None:
                self.writers.end(Fate.COMMIT)
            else:
                fate = next(left, None)
                self.writers.take(len(self.writers.queue) if fate is None else 1)
                self.writers.end(fate or Fate.COMMIT)
            await _idle()
        stuck = [command for task, command in self.tasks.items() if not task.done()]
        assert not stuck, f"never answered: {stuck}"

    async def check(self) -> None:
        self._follow()
        self._check_answers()
        if self.model.meta is None:
            with pytest.raises(ProtocolError) as raised:
                self.service.native.existing(REF)
            assert raised.value.code is ErrorCode.STREAM_NOT_FOUND
            return
        assert self.service.native.existing(REF) == self.model.meta
        producers = self.catalog.producer_states(*KEY)
        assert {p: (s.epoch, s.last_seq) for p, s in producers.items()} == {
            p: (s.epoch, s.last_seq) for p, s in self.model.producers.items()
        }
        assert await self._read_all() == [body for _offset, body in self.model.messages]

    def check_converged(self) -> None:
        """Every 504 has an outcome, and the catalog is what the committed state records give
        a follower replaying them."""
        for task in self.tasks:
            if isinstance(task.exception(), OutcomeUnknown):
                batch = self._batch_of(task)
                assert batch is not None
                assert self.writers.outcomes[id(batch)] is not Outcome.OPEN
        rebuilt = Catalog()
        for _batch, _offsets, state in self.writers.commits:
            for topic, key, value in state:
                if topic == TOPICS.meta:
                    rebuilt.apply(key, value)
                elif topic == TOPICS.producers:
                    rebuilt.apply_producer(key, value)
        meta, producers = self._carried_forward(rebuilt)
        assert meta == self.catalog.stream(*KEY)
        assert producers == dict(self.catalog.producer_states(*KEY))

    def _carried_forward(
        self, rebuilt: Catalog
    ) -> tuple[StreamMeta | None, dict[str, ProducerRecord]]:
        """The stream as its state records leave it, carried forward over its committed records
        (what a slot's next owner rebuilds: from format level 7 a pure append commits no state
        record). Every command is decided and answered at NOW, its records' timestamp."""
        meta = rebuilt.stream(*KEY)
        producers = dict(rebuilt.producer_states(*KEY))
        if meta is None:
            return meta, producers
        logged = [
            logged_record(entry.offset, NOW, entry.record.headers)
            for entry in self.writers.log
            if entry.outcome is Outcome.COMMITTED
            and entry.record.key == stream_key(REF.stream_id)
            and entry.offset >= meta.next_offset  # below: in the state, or an earlier stream's
        ]
        carried = carry_forward(StreamState(meta, producers), logged)
        assert carried is not None
        return carried.meta, dict(carried.producers)

    def _follow(self) -> None:
        """Apply to the model every batch committed since it last looked, in commit order."""
        for batch, offsets, state in self.writers.commits[self.followed :]:
            task = self.writers.enqueued_by[id(batch)]
            assert task is not None
            self.model.commit(self.tasks[task], batch, offsets, state)
        self.followed = len(self.writers.commits)

    def _check_answers(self) -> None:
        """Each answer given so far agrees with what the log did with its batch."""
        for task, command in self.tasks.items():
            if not task.done():
                continue
            batch = self._batch_of(task)
            outcome = None if batch is None else self.writers.outcomes.get(id(batch))
            error = task.exception()
            if isinstance(error, LogUnavailable):
                assert outcome is not Outcome.COMMITTED, f"{command}: answered 503, but visible"
            elif isinstance(error, OutcomeUnknown):
                assert outcome is not None, f"{command}: answered 504 for a batch never written"
            elif isinstance(error, ProtocolError):
                assert status_of(error.code) < 500, f"{command}: {error}"
                assert batch is None, f"{command}: refused, yet written"
            elif error is not None:
                raise error
            else:
                self._check_success(command, task.result(), batch, outcome)

    def _check_success(
        self, command: Command, answer: object, batch: WriteBatch | None, outcome: Outcome | None
    ) -> None:
        written = (isinstance(answer, Appended) and answer.appended) or (
            isinstance(answer, Created) and answer.created
        )
        if command is None or written:
            assert batch is not None, f"{command}: answered as written, yet never queued"
            assert outcome is Outcome.COMMITTED, f"{command}: answered as written, yet {outcome}"
        else:
            assert batch is None, f"{command}: answered as a repeat, yet written"
        if isinstance(answer, Appended) and answer.kafka is not None:
            assert batch is not None
            assert answer.kafka.offset == self._offsets_of(batch)[0]

    def _batch_of(self, task: asyncio.Task[object]) -> WriteBatch | None:
        return self.writers.batch_of.get(task)

    def _offsets_of(self, batch: WriteBatch) -> list[int]:
        return next(offsets for b, offsets, _state in self.writers.commits if b is batch)

    async def _read_all(self) -> list[bytes]:
        """The stream from its beginning, chunk after chunk; each chunk holds the model's
        messages between the offsets it starts and ends at."""
        found: list[bytes] = []
        position: ReadFrom = BEGINNING
        for _ in range(len(self.model.messages) + 2):
            chunk = await self.service.native.read(Read(REF, position))
            expected = [b for o, b in self.model.messages if chunk.start <= o < chunk.next_offset]
            assert chunk.messages == expected, f"read from {position}"
            found += chunk.messages
            if chunk.up_to_date:
                return found
            position = chunk.next_offset
        raise AssertionError(f"the reads never reached the tail; found {found}")


async def _run(
    commands: list[tuple[Command, int]],
    schedule: list[list[LogStep]],
    finale: list[Fate],
    learned: bool,
) -> None:
    run = _Run()
    try:
        run.issue(create())
        await run.drain([], learned)
        for index, (command, others) in enumerate(commands):
            run.writers.others += others
            run.issue(command)
            await _idle()
            for step in schedule[index] if index < len(schedule) else []:
                _act(run.writers, step)
                await _idle()
            await run.check()
        await run.drain(finale, learned)
        await run.check()
        run.check_converged()
    finally:
        run.close()


# Derandomized and without a database: the same runs every time. Generation may be slow on a
# loaded machine (histories of ten commands or more, with the log's steps): not a failure.
@settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(LONG_COMMANDS, SCHEDULES, st.lists(FATES, max_size=8), st.booleans())
def test_the_driver_answers_as_the_machine_over_what_committed(
    commands: list[tuple[Command, int]],
    schedule: list[list[LogStep]],
    finale: list[Fate],
    learned: bool,
) -> None:
    asyncio.run(_run(commands, schedule, finale, learned))


def test_a_sliding_ttl_counts_from_the_commit_not_the_decision() -> None:
    asyncio.run(_sliding_ttl_from_the_commit())


async def _sliding_ttl_from_the_commit() -> None:
    run = _Run()
    run.issue(create(ttl_seconds=2))
    await _idle()
    run.now = NOW + 700  # the transaction takes 0.7 s to commit, and the 201 leaves then
    run.writers.take(1)
    run.writers.end(Fate.COMMIT)
    await _idle()
    assert all(task.done() for task in run.tasks)
    run.now = NOW + 700 + 1_999  # 2.7 s after the decision, within 2 s of the answer: alive
    assert run.service.native.existing(REF).last_access_ms == NOW + 700
    run.now = NOW + 700 + 2_000
    with pytest.raises(ProtocolError) as raised:
        run.service.native.existing(REF)
    assert raised.value.code is ErrorCode.STREAM_NOT_FOUND
    run.close()


def test_a_refused_append_still_renews_a_sliding_ttl() -> None:
    """An append is an access whatever its answer: the machine's step says so, the service
    holds the renewal."""
    asyncio.run(_refused_append_renews())


async def _refused_append_renews() -> None:
    run = _Run()
    run.issue(create(ttl_seconds=2))
    await _idle()
    run.writers.take(1)
    run.writers.end(Fate.COMMIT)
    await _idle()
    run.now = NOW + 1_500
    run.issue(append(b"x", "application/json"))  # another content type: 409
    await _idle()
    refused = list(run.tasks)[-1].exception()
    assert isinstance(refused, ProtocolError)
    assert refused.code is ErrorCode.CONTENT_TYPE_MISMATCH
    run.now = NOW + 1_500 + 1_999
    assert run.service.native.existing(REF).last_access_ms == NOW + 1_500
    run.close()
