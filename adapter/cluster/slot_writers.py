"""One transactional writer per owned write slot, started and retired as ownership moves.

Gaining slot k: create the producer `{prefix}writer-{k}` and init_transactions (which fences
the previous owner's producer and aborts its open transaction), commit the slot's owner record
(this instance's URL) with that producer, then wait until the meta follower has applied the
state topics up to their end offsets taken after that init, carry the slot's streams forward
over its partitions' records after their state (`recover`: `adapter/state/slot_takeover.py`),
and only then accept writes for k. Losing slot k: refuse new writes at once, let the batches
already submitted finish (bounded), commit the hand-over's records with the slot's producer
(the slot's checkpoint, and its release in the owners topic: `hand_over`), then drop the
producer. A writer fenced while the group
still gives us its slot (its transaction outlived `transaction.timeout.ms`, say) would refuse
every write for good: the first write that finds it fenced asks the coordinator, and if the
slot is still ours, the writer is retired and the slot gained again with a new producer. So is
a writer that could not learn the outcome of a commit it answered 504 within a second learning
budget: the new producer's init ends that transaction, and the catch-up brings its state into
the catalog if it committed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from adapter.log.errors import LogUnavailable, Retriable
from adapter.log.faults import WriterFaults
from adapter.log.transaction_turns import Turns
from adapter.log.writer import (
    GuessCounts,
    LogWriter,
    Record,
    StateEntry,
    StateWritten,
    WriteBatch,
    WriterLimits,
)
from adapter.tasks import Kind, Tasks
from topology.kafka_client import KafkaAccess
from topology.naming import writer_transactional_id

log = logging.getLogger(__name__)

RETRY_GAIN_S = 1.0
# A renewal waits for the transaction in flight (a flush and a commit), then for the
# coordinator's word and the new producer's init: a few Kafka timeouts at most.
RENEW_TIMEOUTS = 4


@dataclass
class _Slot:
    writer: LogWriter
    task: asyncio.Task[None]
    mark: int  # the offset of the owner record this writer committed: its generation


async def _nothing() -> None:
    return None


class SlotWriters:
    """The writers of the slots this instance owns; `submit` routes a batch to one of them."""

    def __init__(
        self,
        kafka: KafkaAccess,
        count: int,
        limits: WriterLimits,
        catch_up: Callable[[], Awaitable[None]],
        may_reinit: Callable[[int], bool],
        announce: Callable[[int], StateEntry],
        tasks: Tasks,
        on_state_written: Callable[[list[StateWritten]], None] = lambda _state: None,
        on_state_settled: Callable[[list[StateWritten], bool], None] = lambda _s, _a: None,
        faults: WriterFaults | None = None,
        on_timing: Callable[[str, float], None] = lambda _stage, _seconds: None,
        on_change: Callable[[], None] = lambda: None,
        turns: Turns | None = None,
        recover: Callable[[list[int]], Awaitable[None]] = lambda _slots: _nothing(),
        hand_over: Callable[[int], list[StateEntry]] = lambda _slot: [],
    ) -> None:
        self.kafka = kafka
        self._turns = turns  # shared by the writers: transactions at once (None: no limit)
        self.prefix = kafka.prefix
        # Why the last slot that failed to initialise did (an ACL refusal names what it
        # refused): `/readyz` shows it until a slot initialises.
        self.last_failure: str | None = None
        self.count = count
        self.limits = limits
        self._catch_up = catch_up
        self._recover = recover
        self._hand_over = (
            hand_over  # what its owner writes last, of a slot lost: checkpoint, release
        )
        self._may_reinit = may_reinit
        self._announce = announce
        self._on_state_written = on_state_written
        self._on_state_settled = on_state_settled
        self._on_timing = on_timing
        self._assigned: set[int] = set()  # what the group gave us
        self._slots: dict[int, _Slot] = {}  # producers initialised
        self._ready: set[int] = set()  # caught up: accepting writes
        self._changes = asyncio.Lock()
        # The slots' writers (services: one that ends is a bug, and the instance can no longer
        # write its slots, so the group's `on_failure` stops it rather than look ready) and the
        # changes of ownership that retry a gain or renew a writer (jobs: one that raises is a
        # bug too).
        self.tasks = tasks
        self._renewing: set[int] = set()  # slots whose fenced writer is being replaced
        self.on_change = on_change  # what is assigned, initialised or ready changed
        # Test-only fault injection (adapter/faults_for_tests.py), shared by every writer.
        self.faults = faults or WriterFaults()

    # -- the write path --------------------------------------------------------------------

    def accepting(self, slot: int) -> bool:
        return slot in self._ready

    def accepting_all(self) -> bool:
        """Whether every slot's writes are taken here (a lone instance): then every stream
        any owner made is in this catalog (a new owner catches up before it takes a slot)."""
        return len(self._ready) == self.count

    async def submit(
        self, slot: int, records: list[Record], finalize: Callable[[list[int]], list[StateEntry]]
    ) -> list[int]:
        return await self._writer(slot).submit(records, finalize)

    def learning(self, slot: int) -> bool:
        """Whether the slot's writer is learning the outcome of a commit it answered 504: the
        slot's state may lack that commit, so nothing is decided on it meanwhile. A writer
        that could not learn it within a second budget is renewed (see `LogWriter._learn_on`)."""
        entry = self._slots.get(slot)
        if entry is None or not entry.writer.learning:
            return False
        if entry.writer.lost:
            self._renew_soon(slot, entry.writer)
        return True

    def enqueue(self, slot: int, batch: WriteBatch) -> WriteBatch:
        """Queue a batch without waiting for it (its future tells the outcome)."""
        return self._writer(slot).enqueue(batch)

    def mark(self, slot: int) -> int:
        """The generation of the slot's writer here: the offset of the owner record it
        committed (-1: none). A write forwarded under another owner record was meant for
        another generation, which may be fenced with it still unwritten, and its forwarder may
        learn so and send it again: it must not be written by this one too."""
        entry = self._slots.get(slot)
        return -1 if entry is None else entry.mark

    def _writer(self, slot: int) -> LogWriter:
        if slot not in self._ready:
            raise LogUnavailable(f"write slot {slot} is not owned here (ownership is moving)")
        writer = self._slots[slot].writer
        if writer.fenced:
            self._renew_soon(slot, writer)
            raise LogUnavailable(f"write slot {slot}: its producer was fenced; retry")
        if writer.lost:
            self._renew_soon(slot, writer)
        return writer

    def guesses(self) -> GuessCounts:
        """Offset guesses of the writers this instance has now (see adapter/log/tails.py)."""
        counts = [entry.writer.guesses for entry in self._slots.values()]
        return GuessCounts(sum(c.one_round for c in counts), sum(c.missed for c in counts))

    async def renew_producers(self) -> int:
        """Give every writer a new producer after its transaction in flight (see
        `LogWriter.renew_producer`); how many writers were renewed. A writer started from now
        on makes its producer from the new files anyway."""
        writers = [entry.writer for entry in self._slots.values()]
        budget = self.limits.timeout_s * RENEW_TIMEOUTS
        try:
            await asyncio.wait_for(
                asyncio.gather(*(writer.renew_producer() for writer in writers)), budget
            )
        except TimeoutError:
            log.warning("the write slots' producers not all renewed within %.0f s", budget)
        return len(writers)

    # -- ownership changes -----------------------------------------------------------------

    @property
    def assigned(self) -> frozenset[int]:
        return frozenset(self._assigned)

    @property
    def ready(self) -> frozenset[int]:
        return frozenset(self._ready)

    async def gain(self, slots: list[int]) -> None:
        self._assigned.update(slots)
        self.on_change()
        async with self._changes:
            wanted = [k for k in slots if k in self._assigned and k not in self._slots]
            started = await asyncio.gather(*(self._start(k) for k in wanted))
            fresh = [k for k, ok in zip(wanted, started, strict=True) if ok]
            if fresh:
                await self._caught_up(fresh)
        self.on_change()

    async def lose(self, slots: list[int], drain_s: float) -> None:
        self._assigned.difference_update(slots)
        self._ready.difference_update(slots)  # no new writes from here on
        self.on_change()
        async with self._changes:
            await asyncio.gather(*(self._retire(k, drain_s, hand_over=True) for k in slots))
        self.on_change()

    async def close(self) -> None:
        """No change of ownership starts a writer any more; every slot is retired (in-flight
        batches finish first, bounded), then whatever task is left ends."""
        self.tasks.cancel(Kind.JOB)
        await self.lose(sorted(self._slots), drain_s=self.limits.timeout_s)
        await self.tasks.close()

    async def _start(self, slot: int) -> bool:
        # Where to forward this slot's writes, committed by the new producer (so after every
        # earlier holder is fenced) as a state record: the offset it lands at, noted on the
        # writer's thread just before its commit, is the writer's generation (`mark`).
        entry = self._announce(slot)
        landed: list[int] = []

        def written(state: list[StateWritten]) -> None:
            landed.extend(w.offset for w in state if (w.topic, w.key) == entry[:2])
            self._on_state_written(state)

        writer = LogWriter(
            self.kafka,
            writer_transactional_id(self.prefix, slot),
            self.limits,
            may_reinit=lambda: self._may_reinit(slot),
            faults=self.faults,
            on_state_written=written,
            on_state_settled=self._on_state_settled,
            on_timing=self._on_timing,
            turns=self._turns,
        )
        task: asyncio.Task[None] | None = None
        began = time.monotonic()
        try:
            await asyncio.wait_for(writer.start(), self.limits.timeout_s + 1)
            inited = time.monotonic()
            task = self.tasks.spawn(writer.run(), f"writer-{slot}")  # retiring cancels it
            await asyncio.wait_for(
                writer.submit([], lambda _offsets: [entry]), self.limits.timeout_s * 2
            )
            log.info(
                "write slot %d: producer initialised in %.1f s, owner record committed in %.1f s",
                slot,
                inited - began,
                time.monotonic() - inited,
            )
        except (Retriable, TimeoutError) as error:
            log.warning("write slot %d not initialised, retrying: %s", slot, error)
            self.last_failure = str(error) or type(error).__name__
            self.on_change()
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            await writer.close()
            asyncio.get_running_loop().call_later(RETRY_GAIN_S, self._retry, slot)
            return False
        # The last noted: a transaction written again (its offsets guessed wrong) notes anew.
        self._slots[slot] = _Slot(writer, task, landed[-1])
        self.last_failure = None
        return True

    def _renew_soon(self, slot: int, writer: LogWriter) -> None:
        if slot in self._renewing:
            return
        self._renewing.add(slot)
        task = self.tasks.spawn(self._renew(slot, writer), f"renew-{slot}", Kind.JOB)
        task.add_done_callback(lambda _task: self._renewing.discard(slot))

    async def _renew(self, slot: int, writer: LogWriter) -> None:
        """Replace a fenced writer, or one that cannot learn an outcome, if the coordinator
        says the slot is still ours."""
        if not await asyncio.to_thread(self._may_reinit, slot):
            return  # not ours: the rebalance that says so retires the writer
        async with self._changes:
            entry = self._slots.get(slot)
            if entry is None or entry.writer is not writer or slot not in self._assigned:
                return
            why = "was fenced" if writer.fenced else "cannot learn an outcome"
            log.warning("write slot %d: still ours but its writer %s; renewing", slot, why)
            self._ready.discard(slot)
            self.on_change()
            await self._retire(slot, 0)
        await self.gain([slot])

    async def _write_hand_over(
        self, slot: int, writer: LogWriter, state: list[StateEntry], timeout_s: float
    ) -> None:
        """The slot's hand-over records (its checkpoint, its release), by its writer (fenced
        if the slot moved already); unwritten, the next owner's scan of the slot's partitions
        is longer, and a forwarder waiting on a write of the slot waits for that owner."""
        began = time.monotonic()
        try:
            await asyncio.wait_for(writer.submit([], lambda _offsets: state), timeout_s)
        except (Retriable, TimeoutError) as error:
            log.warning("write slot %d: hand-over not written: %s", slot, error)
            return
        log.info(
            "write slot %d: hand-over of %d records written in %.0f ms",
            slot,
            len(state),
            (time.monotonic() - began) * 1000,
        )

    def _retry(self, slot: int) -> None:
        if slot in self._assigned and slot not in self._slots:
            self.tasks.spawn(self.gain([slot]), f"gain-{slot}", Kind.JOB)

    async def _caught_up(self, slots: list[int]) -> None:
        """Accept writes once the catalog holds every change committed before our init: the
        state topics followed to their ends, then the slots' streams carried forward over
        their data records."""
        began = time.monotonic()
        try:
            await self._catch_up()
            await self._recover(slots)
        except (Retriable, TimeoutError) as error:
            log.warning("slots %s: catalog not caught up, retrying: %s", slots, error)
            for slot in slots:
                await self._retire(slot, 0)
                asyncio.get_running_loop().call_later(RETRY_GAIN_S, self._retry, slot)
            return
        self._ready.update(k for k in slots if k in self._assigned)
        log.info(
            "accepting writes for slots %s (caught up in %.1f s)",
            sorted(slots),
            time.monotonic() - began,
        )

    async def _retire(self, slot: int, drain_s: float, hand_over: bool = False) -> None:
        """Stop the slot's writer: after its batches in flight (within `drain_s`) and, when
        the slot moves to another owner, its hand-over's records (`hand_over`)."""
        entry = self._slots.pop(slot, None)
        if entry is None:
            return
        drained = drain_s > 0 and await entry.writer.drain(drain_s)
        if drain_s > 0 and not drained:
            log.warning("write slot %d: in-flight transactions did not finish in time", slot)
        state = self._hand_over(slot) if hand_over else []
        if drained and state:
            await self._write_hand_over(slot, entry.writer, state, drain_s)
        entry.task.cancel()
        await asyncio.gather(entry.task, return_exceptions=True)
        entry.writer.fail_pending(f"write slot {slot} moved to another instance; retry")
        await entry.writer.close()
        log.info("released write slot %d", slot)
