"""The transactional writer: appends from many requests share one Kafka transaction.

Each request submits a `WriteBatch` (its records plus a function that turns their offsets into
metadata updates). A single loop takes every batch waiting, writes them all in one transaction
(data records and the metadata records built from their offsets), commits, and resolves each
batch's future with its offsets. The offsets are guessed where the writer knows its partitions'
tails, so data and metadata go in one round trip (`adapter/log/tails.py`); otherwise a flush
tells them before the metadata is written. A transaction costs about the same whatever it
holds, so throughput comes from batching; a request waits for exactly the commit that holds
its records. What a transaction takes, how long a batch may wait and how much may wait are
bounded (`adapter/log/batch_queue.py`), so no request or flood overflows librdkafka's queue. The
writers of one instance take turns (`adapter/log/transaction_turns.py`): a slot waiting for its turn
gathers more batches into its next transaction.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from adapter.log import batch_queue, outcomes
from adapter.log.errors import LogUnavailable, OutcomeUnknown
from adapter.log.faults import WriterFaults as WriterFaults  # re-exported for its importers
from adapter.log.outcomes import Probe
from adapter.log.tails import PartitionTails
from adapter.log.transaction_turns import Turns
from adapter.log.write_batches import Record as Record  # re-exported: importers predate batches.py
from adapter.log.write_batches import StateEntry as StateEntry
from adapter.log.write_batches import WriteBatch as WriteBatch
from adapter.log.write_batches import committed, expired, unbroken
from topology.kafka_client import KafkaAccess, denied, serve_callbacks

log = logging.getLogger(__name__)

FENCING_CODES = frozenset(
    {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
)
# Its producers' transaction.timeout.ms, and how often one transaction's commit is tried (each
# bounded by the Kafka timeout) before its outcome counts as unknown.
TRANSACTION_TIMEOUT_MS = 60_000
COMMIT_ATTEMPTS = 3
# How long an unknown outcome is sought before the answer says it is unknown (504): in Kafka
# timeouts, plus the pause between rounds (`adapter/cluster/deadlines.py` adds it up).
LEARNING_TIMEOUTS = 3
LEARNING_PAUSE_S = 1.0
FENCED_MESSAGE = "fenced: another instance owns this write slot now; retry"
UNKNOWN_MESSAGE = "the outcome of this write could not be learned"
BUSY_MESSAGE = "write slot busy: too much is waiting to be written; retry"
LEARNING_MESSAGE = "write slot busy: the outcome of an earlier write is being learned; retry"
QUEUE_FULL_MESSAGE = "kafka: the producer's queue is full; nothing was written; retry"


class LogWriter:
    """One transactional producer, fed by a group-commit loop.

    `may_reinit` is asked (on the writer's thread) before a failed producer is replaced: a new
    producer's init_transactions fences whoever holds the transactional id, so an instance
    that may have lost the id to another owner must not take it back.
    """

    def __init__(
        self,
        kafka: KafkaAccess,
        transactional_id: str,
        settings: WriterLimits,
        may_reinit: Callable[[], bool] = lambda: True,
        faults: WriterFaults | None = None,
        on_state_written: Callable[[list[StateWritten]], None] = lambda _state: None,
        on_state_settled: Callable[[list[StateWritten], bool], None] = lambda _s, _a: None,
        on_timing: Callable[[str, float], None] = lambda _stage, _seconds: None,
        turns: Turns | None = None,
    ) -> None:
        self.limits = settings
        # Shared by the instance's writers: how many write a transaction at once.
        self._turns = turns or Turns(0)
        self.bounds = batch_queue.policy(settings.max_message_bytes, settings.timeout_s)
        self.transactional_id = transactional_id
        self._may_reinit = may_reinit
        self._idle = asyncio.Event()  # nothing queued, no commit running
        self._idle.set()
        self.kafka = kafka
        owned: dict[str, Any] = {
            "transactional.id": transactional_id,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 0,
            "queue.buffering.max.messages": batch_queue.QUEUE_MESSAGES,
            "queue.buffering.max.kbytes": self.bounds.queue_kbytes,
            "message.max.bytes": settings.max_message_bytes + 64 * 1024,
            "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
        }
        self._config = kafka.config(owned, "librdkafka.writer")
        self._producer: Producer | None = None
        self._unbuilt: str | None = None  # why librdkafka last refused to build a producer
        self._tails = PartitionTails()  # touched only on the writer's thread
        self.guesses = GuessCounts()
        self.fenced = False
        self.faults = faults or WriterFaults()
        # Told, on the writer's thread, where a transaction's state records are, just before
        # it commits (see adapter/state/own_records.py).
        self._on_state_written = on_state_written
        # Told, on the event loop, whether those records' commit was applied to the catalog
        # (True) or answered without it (False: its outcome unknown, or aborted).
        self._on_state_settled = on_state_settled
        # Told, on the writer's thread, how long a transaction's "produce" (records sent and
        # acknowledged) and "commit" stages took, in seconds (the metrics).
        self._on_timing = on_timing
        self._stopping = False  # retired: stop trying to learn an unknown outcome
        self._committing = False  # a transaction is being written (on the thread)
        # A commit answered 504 whose outcome is still being learned: until it is known the
        # slot's state may lack it, so the slot takes no batch (see `_learn_on`).
        self._open: _Open | None = None
        self.lost = False  # not learned within a second budget either: the slot is renewed
        self._queue = batch_queue.SlotQueue[WriteBatch](self.bounds)
        self._arrived = asyncio.Event()  # set when the queue may hold a batch
        self._expiry: asyncio.TimerHandle | None = None  # armed while the queue holds a batch
        # Every producer call runs on this one thread: librdkafka transactions are not
        # meant to be driven from several threads at once.
        self._thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kafka-writer")

    async def start(self) -> None:
        """Create the producer and fence any earlier incarnation (aborting its open transaction)."""
        await self._on_thread(self._init_producer)

    async def submit(
        self, records: list[Record], finalize: Callable[[list[int]], list[StateEntry]]
    ) -> list[int]:
        """Write the records and their metadata atomically; return the records' offsets."""
        return await asyncio.shield(self.enqueue(WriteBatch(records, finalize)).future)

    def enqueue(self, batch: WriteBatch) -> WriteBatch:
        """Queue a batch for the next transaction; its future tells the outcome.

        Raises LogUnavailable at once when the queue is full (`adapter/log/batch_queue.py`); a
        queued batch not taken into a transaction within the deadline fails unwritten.
        """
        loop = asyncio.get_running_loop()
        batch.future = loop.create_future()
        if self._open is not None:
            raise LogUnavailable(LEARNING_MESSAGE)
        if not self._queue.offer(batch, batch.size, loop.time()):
            raise LogUnavailable(BUSY_MESSAGE)
        self._idle.clear()
        self._arrived.set()
        if self._expiry is None:
            self._arm_expiry(loop)
        return batch

    async def run(self) -> None:
        """The group-commit loop; runs until cancelled."""
        while True:
            if self._open is not None:
                await self._learn_on(self._open)
                continue
            await self._arrived.wait()
            async with self._turns.turn():  # what arrives meanwhile joins this transaction
                await self._take_and_write()

    async def _take_and_write(self) -> None:
        """One transaction of every batch waiting that fits it (none if none is left)."""
        taken = self._queue.take(asyncio.get_running_loop().time())
        expired(taken.expired)
        batches = unbroken(taken.batches)
        if not len(self._queue):
            self._arrived.clear()
        if not batches:
            self._settle_idle()
            return
        self._committing = True
        try:
            await self._write(batches)
        finally:
            self._committing = False
            self._settle_idle()

    async def _write(self, batches: list[WriteBatch]) -> None:
        """One transaction of the batches; each one's future gets its outcome."""
        commit = asyncio.ensure_future(self._on_thread(self._commit, batches))
        try:
            done = await asyncio.shield(commit)
        except asyncio.CancelledError:
            await self._answer_retired(commit, batches)
            raise
        except LogUnavailable as error:
            self._unapplied(error)
            for batch in batches:
                batch.fail(LogUnavailable(str(error)))
            return
        except _Unlearned as error:
            # Answered 504 now; learned before the slot decides anything again.
            self._open = _Open(batches, error.probe, error.done)
            for batch in batches:
                batch.fail(OutcomeUnknown(str(error)))
            for batch in self._queue.clear():
                batch.fail(LogUnavailable(LEARNING_MESSAGE))
            return
        except Exception:
            # A bug: the loop dies and the process stops, but no request is left unanswered.
            for batch in [*batches, *self._queue.clear()]:
                batch.fail(LogUnavailable("the slot's writer stopped; retry"))
            raise
        committed(batches, done.offsets)
        self._on_state_settled(done.state, True)

    async def _learn_on(self, open_: _Open) -> None:
        """Learn the outcome of a commit answered 504 before the slot takes another batch.

        Every decision on the slot's streams waits (503) meanwhile: the catalog, the hot tail
        and the producer states lack that commit, and a decision on them could write a
        producer's retry twice or extend a hot tail over the commit's records. Once known, a
        commit that happened is applied as any (catalog, hot tail, live readers); one that did
        not leaves them as they are. Not known within another learning budget either, the writer
        asks to be renewed (`lost`): the new producer's init ends the transaction and its slot
        accepts writes again only once the catalog has followed the log (its state records'
        echoes are news from then on). Learning goes on until then.
        """
        self._idle.clear()
        self._committing = True
        try:
            while self._open is open_:
                learning = asyncio.ensure_future(self._on_thread(self._learn, open_.probe))
                try:
                    happened = await asyncio.shield(learning)
                except OutcomeUnknown as error:
                    if not self.lost:
                        log.warning("%s: %s; renewing the slot", self.transactional_id, error)
                    self.lost = True
                    continue
                self._learned(open_, happened)
        except asyncio.CancelledError:
            self._stopping = True  # retired: the next owner's producer ends the transaction
            self._on_state_settled(open_.done.state, False)
            raise
        finally:
            self._committing = False
            self._settle_idle()

    def _learned(self, open_: _Open, happened: bool) -> None:
        """The outcome of a commit answered 504 is known: the slot's state follows it."""
        self._open, self.lost = None, False
        if not happened:
            log.warning("%s: a commit answered unknown did not happen", self.transactional_id)
            self._on_state_settled(open_.done.state, False)
            return
        log.warning("%s: a commit answered unknown did commit", self.transactional_id)
        committed(open_.batches, open_.done.offsets)
        # Only a stream's write applies all it commits itself (`on_commit`); the state of
        # any other batch is applied by its caller, who was told 504: the follower applies it.
        applied = all(batch.on_commit is not None for batch in open_.batches)
        self._on_state_settled(open_.done.state, applied)

    @property
    def learning(self) -> bool:
        """Whether a commit answered 504 is still being learned (the slot decides nothing)."""
        return self._open is not None

    def _unapplied(self, error: BaseException | None) -> None:
        """A commit answered without its outcome applied: its state records' echoes are news."""
        if isinstance(error, _NotApplied | _Unlearned):
            self._on_state_settled(error.state, False)

    def _settled_late(self, commit: asyncio.Future[Committed]) -> None:
        """A commit that outlived its answer (503): whatever it did was never applied."""
        if commit.cancelled():
            return
        error = commit.exception()
        if error is None:
            self._on_state_settled(commit.result().state, False)
        else:
            self._unapplied(error)

    def _expire(self) -> None:
        """Fail the batches that waited past the deadline (never one already in a transaction)."""
        loop = asyncio.get_running_loop()
        self._expiry = None
        expired(self._queue.expire(loop.time()))
        self._settle_idle()
        self._arm_expiry(loop)

    def _arm_expiry(self, loop: asyncio.AbstractEventLoop) -> None:
        """One timer for the whole queue, due when its oldest batch passes the deadline (a timer
        per batch cost every append a timer and a wake-up)."""
        due = self._queue.next_deadline()
        if due is not None:
            slack = self.bounds.deadline_s * 0.01
            self._expiry = loop.call_at(due + slack, self._expire)

    def _settle_idle(self) -> None:
        if not len(self._queue) and not self._committing:
            self._idle.set()

    async def _answer_retired(
        self, commit: asyncio.Future[Committed], batches: list[WriteBatch]
    ) -> None:
        """Retired mid-commit: answer with the commit's real outcome. Learning it goes on
        after retirement (the next owner's producer ends the transaction either way), bounded
        by the learning budget; past it the answer says the outcome is unknown (504)."""
        self._stopping = True
        # The commit's attempts, then learning: its budget, and the round under way at its end.
        budget = self.limits.timeout_s * (COMMIT_ATTEMPTS + LEARNING_TIMEOUTS)
        budget += self.learning_budget_s
        done, _ = await asyncio.wait([commit], timeout=budget)
        if done and commit.exception() is None:
            committed(batches, commit.result().offsets)
            self._on_state_settled(commit.result().state, True)
            return
        error = commit.exception() if done else None
        if done:
            self._unapplied(error)
        else:
            commit.add_done_callback(self._settled_late)
        for batch in batches:
            batch.fail(
                error
                if isinstance(error, LogUnavailable | OutcomeUnknown)
                else OutcomeUnknown(f"{UNKNOWN_MESSAGE} (the write slot moved)")
            )

    @property
    def learning_budget_s(self) -> float:
        """How long an unknown outcome is sought before it is answered as unknown."""
        return LEARNING_TIMEOUTS * self.limits.timeout_s + LEARNING_PAUSE_S

    async def drain(self, timeout_s: float) -> bool:
        """Wait until every submitted batch has its outcome; False if time ran out."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    async def renew_producer(self) -> None:
        """Replace the producer by a new one, which reads the client's files again (a rotated
        certificate): on the writer's thread, so after the transaction being written (it ends
        on the old producer) and before the next (the batches queued meanwhile wait for it and
        go on the new one). The new producer's init fences the old, idle, one."""
        await self._on_thread(self._renew_producer)

    def _renew_producer(self) -> None:
        if self.fenced or self._stopping or self._producer is None:
            return  # no producer to replace: the next transaction makes one, from the new files
        if not self._may_reinit():
            return  # the slot may be another's now: the change of ownership retires this writer
        try:
            self._init_producer()
        except _Unbuilt as error:  # librdkafka refused the new files: the old one stays
            log.error("%s: producer not renewed: %s", self.transactional_id, error)
        except LogUnavailable as error:
            # Its init may have fenced the old producer: the next transaction makes another.
            self._producer = None
            log.warning("%s: producer not renewed yet: %s", self.transactional_id, error)

    def fail_pending(self, reason: str) -> None:
        """Answer every batch still queued with LogUnavailable (the writer is going away)."""
        for batch in self._queue.clear():
            batch.fail(LogUnavailable(reason))
        self._settle_idle()

    async def close(self) -> None:
        self._producer = None  # librdkafka tears the producer down when it is collected
        self._thread.shutdown(wait=False, cancel_futures=True)

    async def _on_thread(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._thread, fn, *args)

    def _init_producer(self) -> Producer:
        producer = self._new_producer()
        try:
            producer.init_transactions(self.limits.timeout_s)
        except KafkaException as error:
            serve_callbacks(producer)
            raise LogUnavailable(self._init_failure(error)) from error
        self._tails.forget()  # whatever was left open before is aborted now, taking offsets
        self._producer = producer
        return producer

    def _new_producer(self) -> Producer:
        """A producer of the writer's config. One librdkafka refuses to build (certificate
        files made unusable by a rotation gone wrong, say) is a LogUnavailable (`_Unbuilt`):
        the transaction's writes are answered 503 and the writer goes on, trying again at its
        next transaction, so files put right serve again without a restart."""
        try:
            producer = self.kafka.producer(self._config)
        except KafkaException as error:
            inner = _kafka_error(error)
            detail = inner.str() if inner is not None else str(error)
            reason = f"kafka: no producer could be built: {detail}"
            if reason != self._unbuilt:  # once per reason, not at every transaction
                log.error("%s: %s", self.transactional_id, reason)
            self._unbuilt = reason
            raise _Unbuilt(reason) from error
        if self._unbuilt is not None:
            log.warning("%s: a producer could be built again", self.transactional_id)
            self._unbuilt = None
        return producer

    def _init_failure(self, error: KafkaException) -> str:
        """What stopped init_transactions: an ACL refusal, a rejected credential or TLS
        handshake a client reported, or the error itself."""
        inner = error.args[0] if error.args else None
        asked = {"TransactionalId": ("Write", self.transactional_id)}
        if isinstance(inner, KafkaError) and (refusal := denied(inner, asked)):
            return refusal
        return self.kafka.problems.explain(f"initialising the transactional producer: {error}")

    def _commit(self, batches: list[WriteBatch]) -> Committed:
        if self.fenced:
            raise LogUnavailable(FENCED_MESSAGE)
        producer = self._producer or self._reinit()
        try:
            return self._transaction(producer, batches)
        except _CommitUnknown as unknown:
            self._producer = None  # never abort it: the commit may have happened
            self._tails.forget()
            if unknown.fencing is not None:
                self._fence(unknown.fencing)
            if self.faults.trust_unknown_outcomes:  # the broken build of the checker's test
                log.warning("%s: unknown outcome trusted as failed", self.transactional_id)
                raise LogUnavailable(f"{UNKNOWN_MESSAGE} ({unknown.reason})") from None
            try:
                happened = self._learn(unknown.probe)
            except OutcomeUnknown as error:
                raise _Unlearned(str(error), unknown.probe, unknown.done) from None
            if happened:
                log.warning("%s: a commit without an answer did commit", self.transactional_id)
                self._tails.committed([batch.records for batch in batches], unknown.done.offsets)
                return unknown.done
            raise _NotApplied(
                f"kafka: the commit did not happen ({unknown.reason})", unknown.done.state
            ) from None
        except BufferError as error:
            # Backpressure, not a failure of Kafka: the caps should have made it impossible.
            log.warning("%s: %s (%s)", self.transactional_id, QUEUE_FULL_MESSAGE, error)
            self._recover(producer, KafkaError(KafkaError._QUEUE_FULL))
            raise LogUnavailable(QUEUE_FULL_MESSAGE) from error
        except (KafkaException, SystemError) as error:
            # A fatal error met inside a delivery callback (a fencing among them) comes out
            # of flush() as a SystemError whose cause is the KafkaException.
            inner = _kafka_error(error)
            self._recover(producer, inner)
            reason = _refusal(inner, batches, self.kafka.prefix, self.transactional_id) or (
                inner.str() if inner is not None else str(error)
            )
            raise LogUnavailable(FENCED_MESSAGE if self.fenced else f"kafka: {reason}") from error

    def _reinit(self) -> Producer:
        if not self._may_reinit():
            raise LogUnavailable(f"{self.transactional_id}: ownership unconfirmed; retry")
        return self._init_producer()

    def _fence(self, error: KafkaError) -> None:
        # Another instance took this transactional.id: it is the writer now. Fencing it
        # back would make the two take turns, so this writer stops for good; the slot's
        # ownership change (see adapter/cluster/) retires it.
        if not self.fenced:
            log.warning("%s %s (%s)", self.transactional_id, FENCED_MESSAGE, error.str())
        self.fenced = True

    def _transaction(self, producer: Producer, batches: list[WriteBatch]) -> Committed:
        """Data and metadata in one transaction; in one round trip when the offsets are known.

        With a guess (`adapter/log/tails.py`) the metadata is built from it and sent with the
        data; the transaction commits only if every record landed where guessed. Otherwise
        the data goes first, the flush tells its offsets, and the metadata follows.
        """
        batch_records = [batch.records for batch in batches]
        guessed = self._tails.guess(batch_records)
        began = time.monotonic()
        producer.begin_transaction()
        offsets: list[list[int]] = [[-1] * len(batch.records) for batch in batches]
        failures: list[KafkaError] = []
        for b, batch in enumerate(batches):
            for r, record in enumerate(batch.records):
                producer.produce(
                    record.topic,
                    value=record.value,
                    key=record.key,
                    partition=record.partition,
                    headers=record.headers,
                    on_delivery=_delivered(offsets[b], r, failures),
                )
        state_offsets: list[StateWritten] = []
        if guessed is not None:
            _produce_state(producer, batches, guessed, state_offsets)
        if producer.flush(self.limits.timeout_s) > 0:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "flush timed out"))
        if failures:
            raise KafkaException(failures[0])
        if guessed is None:
            _produce_state(producer, batches, offsets, state_offsets)
            if producer.flush(self.limits.timeout_s) > 0:  # the state records' offsets too
                raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "flush timed out"))
        elif offsets != guessed:
            log.info(
                "%s: records landed off the guessed offsets; writing again", self.transactional_id
            )
            self.guesses.missed += 1
            self._tails.forget()
            producer.abort_transaction(self.limits.timeout_s)
            return self._transaction(producer, batches)
        done = Committed(offsets, state_offsets)
        # Before the commit makes them visible: the follower must know these for echoes.
        self._on_state_written(state_offsets)
        committing = time.monotonic()
        self._on_timing("produce", committing - began)
        self._commit_transaction(producer, lambda: _probe(batches, offsets, state_offsets), done)
        self._on_timing("commit", time.monotonic() - committing)
        if self.faults.crash_after_forwarded_commit:  # test-only; nothing on the hot path else
            self.faults.committed(record for records in batch_records for record in records)
        self._tails.committed(batch_records, offsets)
        if guessed is not None:
            self.guesses.one_round += 1
        return done

    def _commit_transaction(
        self, producer: Producer, probe_of: Callable[[], Probe | None], done: Committed
    ) -> None:
        """Commit; a retriable failure leaves the outcome unknown, so commit again, never abort.

        Any other failure leaves the outcome unknown too, even one that asks for an abort: after
        a timed-out attempt the coordinator may have written the commit already, and an error
        surfacing from a broker restart says nothing of what it wrote before. So the writer
        never trusts an error here: `_CommitUnknown` carries what it needs to find out.
        """
        lose_request, lose_reply = self.faults.next_commit()
        for attempt in range(COMMIT_ATTEMPTS):
            try:
                if lose_request:
                    raise _lost("EndTxn request lost (test fault)")
                producer.commit_transaction(self.limits.timeout_s)
                if lose_reply:
                    raise _lost("EndTxn reply lost (test fault)")
                return
            except (KafkaException, SystemError) as error:
                inner = _kafka_error(error)
                if attempt < COMMIT_ATTEMPTS - 1 and inner is not None and _retry_commit(inner):
                    continue
                probe = probe_of()  # the commit flushed the state records: their offsets too
                if probe is None:
                    raise  # no record of it was acknowledged: nothing can have committed
                fencing = inner if inner is not None and inner.code() in FENCING_CODES else None
                reason = inner.str() if inner is not None else str(error)
                raise _CommitUnknown(probe, done, reason, fencing) from error

    def _learn(self, probe: Probe) -> bool:
        """Find out whether an unanswered commit happened (see `adapter/log/outcomes.py`).

        A producer with the transactional id is initialised first (not when fenced or retired:
        the next owner's does that), which ends the transaction either way. Retried within the
        learning budget; meanwhile this slot takes no other transaction. Past the budget the
        outcome is unknown (OutcomeUnknown): answered 504, then learned on (`_learn_on`).
        """
        deadline = time.monotonic() + self.learning_budget_s
        while True:
            try:
                if not self.fenced and not self._stopping and self._producer is None:
                    self._reinit()
                known = outcomes.committed(self.kafka, probe, self.limits.timeout_s)
            except LogUnavailable as error:
                log.warning("%s: outcome not known yet: %s", self.transactional_id, error)
                known = None
            if known is not None:
                return known
            if time.monotonic() >= deadline:
                raise OutcomeUnknown(f"{UNKNOWN_MESSAGE} within {self.learning_budget_s:.0f}s")
            time.sleep(min(LEARNING_PAUSE_S, self.limits.timeout_s))

    def _recover(self, producer: Producer, inner: KafkaError | None) -> None:
        """Abort what can be aborted, then start the next transaction on a fresh producer.

        A refused record (too large, topic gone) can leave the idempotent sequence of the old
        producer out of step with the broker; a new one, fenced in by init_transactions, is
        cheap beside a failed commit and never inherits that state.
        """
        self._tails.forget()  # an aborted or unknown outcome moves the partitions' tails
        if inner is not None and inner.code() in FENCING_CODES:
            self._fence(inner)
        if inner is not None and not inner.fatal():
            try:
                producer.abort_transaction(self.limits.timeout_s)
            except KafkaException:
                log.warning("aborting the failed transaction failed", exc_info=True)
        self._producer = None


@dataclass(frozen=True)
class StateWritten:
    """A state record of a committed transaction, where it landed (each state topic has one
    partition): the meta follower will see it again, and must know it for an echo."""

    topic: str
    key: str
    offset: int


@dataclass(frozen=True)
class Committed:
    """What a transaction wrote: each batch's record offsets, and its state records."""

    offsets: list[list[int]]
    state: list[StateWritten]


class _Unbuilt(LogUnavailable):
    """librdkafka refused to build a producer of the writer's config (its files unusable)."""


class _NotApplied(LogUnavailable):
    """A commit whose state records were written but not applied to the catalog: it did
    not happen, or whether it did is not known."""

    def __init__(self, message: str, state: list[StateWritten]) -> None:
        super().__init__(message)
        self.state = state


class _Unlearned(OutcomeUnknown):
    """A commit whose outcome could not be learned in time: its state records were written,
    not applied; whether they committed is learned later, or the log tells the follower."""

    def __init__(self, message: str, probe: Probe, done: Committed) -> None:
        super().__init__(message)
        self.probe, self.done, self.state = probe, done, done.state


@dataclass(frozen=True)
class _Open:
    """A transaction answered 504, its outcome still being learned."""

    batches: list[WriteBatch]
    probe: Probe
    done: Committed


class _CommitUnknown(Exception):
    """A commit failed without saying whether it happened."""

    def __init__(
        self, probe: Probe, done: Committed, reason: str, fencing: KafkaError | None
    ) -> None:
        super().__init__(reason)
        self.probe, self.done, self.reason, self.fencing = probe, done, reason, fencing


def _retry_commit(error: KafkaError) -> bool:
    return bool(error.retriable()) and not error.txn_requires_abort()


def _kafka_error(error: BaseException) -> KafkaError | None:
    """The KafkaError behind an exception of the client (a SystemError wraps one raised in a
    callback)."""
    cause = error if isinstance(error, KafkaException) else error.__cause__
    inner = cause.args[0] if isinstance(cause, KafkaException) and cause.args else None
    return inner if isinstance(inner, KafkaError) else None


def _lost(reason: str) -> KafkaException:
    """What a commit whose retries all timed out raises."""
    return KafkaException(KafkaError(KafkaError._TIMED_OUT, reason))


@dataclass
class GuessCounts:
    """Transactions committed in one round trip, and guesses that missed (aborted, redone)."""

    one_round: int = 0
    missed: int = 0


@dataclass(frozen=True)
class WriterLimits:
    timeout_s: float
    max_message_bytes: int


def _refusal(
    error: KafkaError | None, batches: list[WriteBatch], prefix: str, transactional_id: str
) -> str | None:
    """`DENIED: Write on Topic ...` when an ACL refused the transaction's topics (Kafka does not
    say which: the batches' data topics, or the state topics when it had no data), or on
    `TransactionalId ...` when it refused the producer's id."""
    if error is None:
        return None
    topics = sorted({record.topic for batch in batches for record in batch.records})
    named = ", ".join(topics) or f"{prefix}internal.* (the state topics)"
    asked = {"Topic": ("Write", named), "TransactionalId": ("Write", transactional_id)}
    return denied(error, asked)


def _produce_state(
    producer: Producer,
    batches: list[WriteBatch],
    offsets: list[list[int]],
    delivered: list[StateWritten],
) -> None:
    """The batches' state records, built from their data's offsets.

    For a compacted topic only the last record of a key counts, so each key is produced once
    (the last batch's value). Each one's offset is noted in `delivered` for the follower.
    """
    state: dict[tuple[str, str], bytes | None] = {}
    for batch, batch_offsets in zip(batches, offsets, strict=True):
        for topic, key, value in batch.finalize(batch_offsets):
            state[(topic, key)] = value
    for (topic, key), value in state.items():
        producer.produce(
            topic, value=value, key=key.encode(), partition=0, on_delivery=_noted(delivered)
        )


def _noted(delivered: list[StateWritten]) -> Callable[[KafkaError | None, Message], None]:
    def report(error: KafkaError | None, message: Message) -> None:
        if error is None:
            key = (message.key() or b"").decode()
            delivered.append(StateWritten(message.topic() or "", key, message.offset() or 0))

    return report


def _probe(
    batches: list[WriteBatch], offsets: list[list[int]], state: list[StateWritten]
) -> Probe | None:
    """A record of the transaction to look for when its outcome is unknown."""
    for batch, batch_offsets in zip(batches, offsets, strict=True):
        if batch.records:
            record = batch.records[0]
            return Probe(record.topic, record.partition, batch_offsets[0])
    return Probe(state[0].topic, 0, state[0].offset) if state else None


def _delivered(
    slots: list[int], index: int, failures: list[KafkaError]
) -> Callable[[KafkaError | None, Message], None]:
    def report(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failures.append(error)
        else:
            slots[index] = message.offset() or 0

    return report
