"""Slot ownership through Kafka group membership: one coordination consumer per instance.

Every instance joins the group `{prefix}owners` subscribed to `{prefix}internal.slots`, a topic
with one partition per write slot; holding partition k means owning slot k. Nothing is ever
read from or written to that topic: the group divides its partitions, and an offset commit for
partition k asks the coordinator whether we still hold slot k (`confirm`). The classic protocol
with the cooperative-sticky assignor is used (not KIP-848's `group.protocol=consumer`) because
its session timeout is the client's `session.timeout.ms`, so a dead owner's slots move within a
few seconds; under KIP-848 the session timeout is a broker-side group setting (at least 45 s by
default) that an application cannot lower by itself. Cooperative-sticky moves only the slots
that must move, so a joining instance does not stall every slot.

The consumer is polled on a thread of its own, so `max.poll.interval.ms` never runs out while
the event loop is busy, and only that thread touches it. Slots gained and lost are handed to
the slot writers on the event loop. Its `client.id` is the instance's advertised URL, so the
group's description (`kafka-consumer-groups --describe`) names each member by where it
serves; forwarding does not read it: each new owner of a slot commits its URL to the owners
topic (`adapter/cluster/slot_writers.py`, `adapter/cluster/routing.py`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from adapter.cluster.confirmations import Confirmations
from adapter.cluster.slot_writers import SlotWriters
from topology.naming import owners_group, slots_topic

log = logging.getLogger(__name__)

POLL_S = 0.2


def heartbeat_ms(session_timeout_ms: int) -> int:
    """How often the owners' consumer heartbeats: a third of the session, at most 1 s.

    With cooperative-sticky a join moves slots in two rounds; between them the slots revoked
    from their old owner are nobody's (writes to them answer 503) until the joining member
    hears of the second round at its next heartbeat. A third of a 10 s session left them
    unowned ~3.4 s (measured, docs/performance.md); 1 s should cut that to about a second.
    """
    return max(100, min(1000, session_timeout_ms // 3))


class SlotOwnership:
    def __init__(
        self,
        bootstrap_servers: str,
        prefix: str,
        advertised_url: str,
        session_timeout_ms: int,
        writers: SlotWriters,
        timeout_s: float,
    ) -> None:
        self.topic = slots_topic(prefix)
        self.group = owners_group(prefix)
        self.writers = writers
        self.timeout_s = timeout_s
        self._confirmations = Confirmations(self.topic)
        self._config: dict[str, Any] = {
            "bootstrap.servers": bootstrap_servers,
            "group.id": self.group,
            "client.id": advertised_url,
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": session_timeout_ms,
            "heartbeat.interval.ms": heartbeat_ms(session_timeout_ms),
            "enable.auto.commit": False,
            "on_commit": self._confirmations.answered,
            "logger": logging.getLogger("librdkafka.owners"),
        }
        self._consumer: Consumer | None = None
        self._holding = threading.Lock()
        self._held: set[int] = set()  # the slots assigned to us, as the callbacks said
        self.joined = False
        self.member_id = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.on_failure: Callable[[BaseException], None] = lambda _error: None

    def start(self) -> None:
        """Join the group; slots arrive through the rebalance callbacks."""
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name="slot-owners", daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        """Leave the group (handing the slots over at once) and wait for the thread."""
        self._stop.set()
        thread = self._thread
        if thread is not None:
            await asyncio.to_thread(thread.join, self.timeout_s * 2)

    def confirm(self, slot: int) -> bool:
        """Ask the group coordinator (blocking; for a writer's thread) whether we hold `slot`.

        A writer whose producer failed must not init a new one (fencing the slot's holder)
        unless the coordinator says this member still holds the slot: a resumed zombie would
        otherwise take its slot back from the rightful owner. The question is an offset
        commit for partition `slot` of the (empty) slots topic: the coordinator accepts it
        only from a member of the current generation, and librdkafka refuses it locally for
        a partition no longer assigned.

        Only the consumer's own thread touches the consumer: calling it from a writer's
        thread while that thread polls was seen to block for good (in `assignment()` and in
        `commit()`), hanging the slot's requests. So the question is handed to the polling
        loop (`adapter/cluster/confirmations.py`), and the answer awaited for `timeout_s` at
        most, whatever other slots ask meanwhile.
        """
        if not self._holds(slot):
            return False
        question = self._confirmations.ask(slot, self.timeout_s)
        if question is None:
            log.warning("cannot confirm ownership of slot %d: no answer in time", slot)
            return False
        if question.error is not None:
            log.warning("ownership of slot %d not confirmed: %s", slot, question.error)
            return False
        return self._holds(slot)  # not revoked while the question was out

    def _holds(self, slot: int) -> bool:
        with self._holding:
            return self._consumer is not None and slot in self._held

    def _run(self) -> None:
        consumer = Consumer(self._config)
        self._consumer = consumer
        consumer.subscribe(
            [self.topic], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._lost
        )
        try:
            while not self._stop.is_set():
                consumer.poll(POLL_S)  # a rebalance callback's exception comes out here too
                self._confirmations.send(consumer)
                self.member_id = consumer.memberid() or ""
        except Exception as error:
            # Without this thread the instance owns no slot and never will again: stop it
            # (exit 1) so that it is restarted, rather than let it look ready.
            log.exception("the slot ownership consumer failed")
            self._fail(error)
        finally:
            self._consumer = None
            self._confirmations.abandon()
            consumer.close()  # revokes every slot through _revoked, then leaves the group

    # The callbacks run on the consumer's thread, inside poll() or close().

    def _assigned(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.joined = True
        slots = sorted(tp.partition for tp in partitions)
        self._hold(slots, held=True)
        log.info("assigned write slots %s", slots)
        self._on_loop(self.writers.gain(slots), wait_s=None)

    def _hold(self, slots: list[int], held: bool) -> None:
        with self._holding:
            if held:
                self._held.update(slots)
            else:
                self._held.difference_update(slots)

    def _revoked(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        slots = sorted(tp.partition for tp in partitions)
        self._hold(slots, held=False)  # from now on no writer of these may re-init
        log.info("revoked write slots %s", slots)
        # Finishing the transactions in flight before the new owner fences them spares
        # their clients a 503; waiting here holds the rebalance back for that long at most.
        self._on_loop(self.writers.lose(slots, self.timeout_s), wait_s=self.timeout_s * 2)

    def _lost(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        slots = sorted(tp.partition for tp in partitions)
        self._hold(slots, held=False)
        log.warning("lost write slots %s (left the group); their writers are fenced", slots)
        self._on_loop(self.writers.lose(slots, 0), wait_s=self.timeout_s)

    def _change_ended(self, future: concurrent.futures.Future[None]) -> None:
        if not future.cancelled() and (error := future.exception()) is not None:
            log.error("changing slot ownership failed", exc_info=error)
            self._fail(error)

    def _fail(self, error: BaseException) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.on_failure, error)

    def _on_loop(self, change: Any, wait_s: float | None) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            change.close()
            return
        future = asyncio.run_coroutine_threadsafe(change, loop)
        if wait_s is None:
            future.add_done_callback(self._change_ended)
            return
        try:
            future.result(wait_s)
        except concurrent.futures.TimeoutError:
            log.warning("releasing write slots took longer than %.1fs", wait_s)
        except concurrent.futures.CancelledError:
            pass
