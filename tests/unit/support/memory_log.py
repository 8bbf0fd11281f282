"""An in-memory partition log behind the interfaces `StreamService` drives
(`adapter/service/interfaces.py`): a slot writer whose every transaction the test decides
(commit, fail, or lose the answer, learned later as committed or not) and whose queued
batches it can expire; a read_committed reader of that log; and the buckets, registered only.

The writer keeps the promises `LogWriter` makes, with the same helpers
(`adapter/log/write_batches.py`): batches are taken in queue order, a batch whose predecessor failed
fails with it (`unbroken`), each transaction's records take consecutive offsets and its marker
the next one (so offsets only grow and aborted ones are never reused), `on_commit` runs in
commit order, and while an unknown outcome is learned the slot takes nothing (`learning`).
Time never moves it: nothing expires or commits until the test says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from adapter.log.errors import LogUnavailable, OutcomeUnknown
from adapter.log.reader import ReadLimits, ReadRequest, ReadResult, RecordPosition, TimeFound
from adapter.log.write_batches import committed, expired, unbroken
from adapter.log.writer import LEARNING_MESSAGE, Record, StateEntry, WriteBatch, WriterLimits
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.model import BucketMeta
from adapter.state.catalog import Catalog
from topology.naming import StateTopics, bucket_topic
from topology.slots import SlotMap
from topology.wire import is_control, stream_key

PREFIX = "memory."
TOPICS = StateTopics.of(PREFIX)
# Far beyond any run: a chain waits for its batches (`Chains.settle`) without timing out.
WRITER_LIMITS = WriterLimits(timeout_s=3600.0, max_message_bytes=1 << 20)
FAILED_MESSAGE = "kafka: the transaction was aborted (in-memory log)"
UNKNOWN_MESSAGE = "the outcome of this write could not be learned (in-memory log)"
OTHER_KEY = stream_key("another stream")  # records of other streams sharing the partition


class Fate(enum.Enum):
    COMMIT = "commit"
    FAIL = "fail"  # aborted: 503, never visible
    UNKNOWN = "unknown"  # answered 504; committed or not, learned later


class Outcome(enum.Enum):
    OPEN = "open"
    COMMITTED = "committed"
    ABORTED = "aborted"


@dataclass
class Transaction:
    """Batches written together; per batch, its records' offsets and its state records."""

    batches: list[WriteBatch]
    offsets: list[list[int]]
    state: list[list[StateEntry]]
    outcome: Outcome = Outcome.OPEN
    logged: list[Logged] = field(default_factory=list)

    def end(self, outcome: Outcome) -> None:
        self.outcome = outcome
        for entry in self.logged:
            entry.outcome = outcome


@dataclass
class Logged:
    """A record of the partition, at its offset."""

    offset: int
    record: Record
    outcome: Outcome


class MemoryWriters:
    """Every slot of the instance, written to one in-memory partition log."""

    def __init__(self) -> None:
        self.limits = WRITER_LIMITS
        self.log: list[Logged] = []
        self.next_offset = 0
        self.queue: list[WriteBatch] = []
        self.taken: list[WriteBatch] | None = None  # in a transaction not ended yet
        self.open: Transaction | None = None  # answered 504, its outcome being learned
        self.others = 0  # other streams' records to write with the next transaction
        self.commits: list[tuple[WriteBatch, list[int], list[StateEntry]]] = []  # commit order
        self.outcomes: dict[int, Outcome] = {}  # by batch id: committed, aborted or open
        self.unwritten: set[int] = set()  # batch ids failed before any transaction took them
        self.enqueued_by: dict[int, asyncio.Task[object] | None] = {}  # batch id: its task
        self.batch_of: dict[asyncio.Task[object], WriteBatch] = {}  # the task's batch
        self.kept: list[WriteBatch] = []  # every batch alive, so no id is reused

    # -- what the service calls ------------------------------------------------------------

    def accepting(self, slot: int) -> bool:
        return True

    def learning(self, slot: int) -> bool:
        return self.open is not None

    def mark(self, slot: int) -> int:
        return -1

    def enqueue(self, slot: int, batch: WriteBatch) -> WriteBatch:
        batch.future = asyncio.get_running_loop().create_future()
        if self.open is not None:
            raise LogUnavailable(LEARNING_MESSAGE)
        self.queue.append(batch)
        self.kept.append(batch)
        task = self.enqueued_by[id(batch)] = asyncio.current_task()
        if task is not None:
            self.batch_of[task] = batch
        return batch

    # -- what the test decides -------------------------------------------------------------

    def take(self, count: int) -> None:
        """Take up to `count` queued batches into a transaction (none while one is open)."""
        if self.taken is not None or self.open is not None or not self.queue:
            return
        batches, self.queue = self.queue[:count], self.queue[count:]
        kept = unbroken(batches)
        self.unwritten.update(id(b) for b in batches if b.failed)
        self.taken = kept or None

    def expire(self, count: int) -> None:
        """The `count` oldest queued batches waited too long: they fail, unwritten."""
        gone, self.queue = self.queue[:count], self.queue[count:]
        expired(gone)
        self.unwritten.update(id(b) for b in gone)

    def end(self, fate: Fate) -> None:
        """End the transaction taken: commit it, abort it, or lose its answer."""
        if self.taken is None:
            return
        transaction = self._write(self.taken)
        self.taken = None
        if fate is Fate.COMMIT:
            self._committed(transaction)
        elif fate is Fate.FAIL:
            transaction.end(Outcome.ABORTED)
            self._note(transaction)
            for batch in transaction.batches:
                batch.fail(LogUnavailable(FAILED_MESSAGE))
        else:
            self.open = transaction
            self._note(transaction)
            for batch in transaction.batches:
                batch.fail(OutcomeUnknown(UNKNOWN_MESSAGE))
            for batch in self.queue:  # as `LogWriter`: the slot takes nothing until learned
                batch.fail(LogUnavailable(LEARNING_MESSAGE))
                self.unwritten.add(id(batch))
            self.queue.clear()

    def learn(self, happened: bool) -> None:
        """The outcome of the transaction answered 504 is known now."""
        transaction, self.open = self.open, None
        if transaction is None:
            return
        if happened:
            self._committed(transaction)
        else:
            transaction.end(Outcome.ABORTED)
            self._note(transaction)

    def busy(self) -> bool:
        """Whether anything is queued, taken or being learned."""
        return bool(self.queue) or self.taken is not None or self.open is not None

    # -- the log ---------------------------------------------------------------------------

    def _write(self, batches: list[WriteBatch]) -> Transaction:
        """The records at their offsets (other streams' first), then the state records built
        from them, as `LogWriter` does before it commits."""
        transaction = Transaction(batches, [], [])
        places = {(r.topic, r.partition) for batch in batches for r in batch.records}
        for topic, partition in sorted(places)[:1]:
            for _ in range(self.others):
                transaction.logged.append(self._append(Record(topic, partition, OTHER_KEY, b"-")))
        self.others = 0
        for batch in batches:
            logged = [self._append(record) for record in batch.records]
            transaction.logged += logged
            offsets = [entry.offset for entry in logged]
            transaction.offsets.append(offsets)
            transaction.state.append(batch.finalize(offsets))
        self.next_offset += 1  # the transaction's marker
        return transaction

    def _append(self, record: Record) -> Logged:
        entry = Logged(self.next_offset, record, Outcome.OPEN)
        self.log.append(entry)
        self.next_offset += 1
        return entry

    def _committed(self, transaction: Transaction) -> None:
        transaction.end(Outcome.COMMITTED)
        self._note(transaction)
        self.commits += zip(
            transaction.batches, transaction.offsets, transaction.state, strict=True
        )
        committed(transaction.batches, transaction.offsets)

    def _note(self, transaction: Transaction) -> None:
        for batch in transaction.batches:
            self.outcomes[id(batch)] = transaction.outcome


class MemoryReader:
    """A read_committed scan of the writer's log, bounded like `LogReader`'s."""

    def __init__(self, writers: MemoryWriters, limits: ReadLimits) -> None:
        self.writers = writers
        self.limits = limits
        self.reads = 0

    async def positions(self, request: ReadRequest) -> tuple[list[RecordPosition], ReadResult]:
        raise NotImplementedError("the histories draw no reads by time")

    async def held_since(self, topic: str, partition: int, timestamp_ms: int) -> TimeFound:
        raise NotImplementedError("the histories draw no reads by time")

    async def read(self, request: ReadRequest) -> ReadResult:
        self.reads += 1
        messages: list[bytes] = []
        taken = request.already
        for entry in self.writers.log:
            record = entry.record
            if entry.offset < request.start or (record.topic, record.partition) != (
                request.topic,
                request.partition,
            ):
                continue
            if entry.offset >= request.stop:
                break
            if entry.outcome is Outcome.OPEN:
                raise LogUnavailable("no data before the timeout (an open transaction)")
            if entry.outcome is Outcome.ABORTED or record.key != request.key:
                continue
            if is_control(record.headers):
                continue
            if (messages or taken) and taken + len(record.value) > self.limits.max_read_bytes:
                return ReadResult(messages, entry.offset, False)
            messages.append(record.value)
            taken += len(record.value)
        return ReadResult(messages, request.stop, True)


class MemoryBuckets:
    """Buckets registered in the catalog, with topics that always exist."""

    def __init__(self, catalog: Catalog, slots: int = 4) -> None:
        self.catalog = catalog
        self.slots = SlotMap(PREFIX, slots)
        self.topics = TOPICS

    def add(self, bucket_id: str, partitions: int) -> BucketMeta:
        meta = BucketMeta(bucket_id, bucket_topic(PREFIX, bucket_id), partitions, 0)
        self.catalog.put_bucket(meta)
        return meta

    async def require(self, bucket_id: str, create: bool, slot: int) -> BucketMeta:
        return self.get(bucket_id)

    @contextlib.asynccontextmanager
    async def creating_stream(self, bucket_id: str) -> AsyncIterator[None]:
        self.get(bucket_id)
        yield

    def partitions_of(self, bucket_id: str) -> int:
        return self.get(bucket_id).partitions

    def topic(self, bucket_id: str) -> str:
        return self.get(bucket_id).topic

    def get(self, bucket_id: str) -> BucketMeta:
        meta = self.catalog.bucket(bucket_id)
        if meta is None:
            raise ProtocolError(ErrorCode.BUCKET_NOT_FOUND, f"bucket {bucket_id!r} not found")
        return meta
