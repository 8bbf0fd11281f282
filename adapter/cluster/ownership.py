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
the slot writers on the event loop. Its `client.id` is the instance's advertised URL (then
`#reads=N`, the newest record format level it reads: `adapter/state/format_gate.py`), so the
group's description (`kafka-consumer-groups --describe`) names each member by where it
serves; forwarding does not read it: each new owner of a slot commits its URL to the owners
topic (`adapter/cluster/slot_writers.py`, `adapter/cluster/routing.py`).

Membership is static (`group.instance.id`, stable per instance): an instance killed and
restarted at once rejoins as the same member and gets its slots back without a rebalance,
instead of waiting for its dead incarnation's session to expire. A static member sends no
LeaveGroup when it closes, so a clean stop unsubscribes first (which does send it): the slots
move at once on a clean stop, after the session timeout on a crash. Two live processes with
one instance id would fence each other in turn: one found in the group under another URL at
start is refused (unless nothing listens at that URL any more: our killed former incarnation,
such as a worker of a `serve --workers` instance restarted whole, whose ports are new), and a
member fenced by a newcomer stops the process (exit 1).

The consumer is made again when the Kafka client's certificate files change (`renew`): the old
one closes without leaving (a static member sends no LeaveGroup) and the new one joins under
the same instance id, which the coordinator takes for the same member, its slots with it and
no rebalance. The slots' writers stay as they are meanwhile (the old consumer's closing
revocation does not retire them); the new consumer's first assignment says which slots are
still ours, and any other is retired then.

The group is described (who holds our id, under which URL) only at start, before serving: the
description is an admin request to the group's coordinator, and librdkafka 2.16 aborts the
process when the coordinator's connection drops under one (a broker flapping killed an
instance that way). A member fenced while serving, which happens when the coordinator moved
while it rejoined, rejoins without asking; one fenced `REFENCES` times within
`REFENCE_WINDOW_S` is taken for one of two live processes fencing each other in turn (the
other started while the group could not be described) and stops (exit 1). A coordinator that
moves is a rare event; two members with one id fence each other at every join.

A consumer subscribed but no member for `unjoined_s` (its session ended and it has not joined
again) is made again, as the same static member (`topology/client_stalls.py` says why). This is
where librdkafka 2.16 was seen to lose every broker for good: with `debug=cgrp,protocol`, after
`Group coordinator decommissioned` the consumer never tried to connect again, `no broker
available for coordinator query` for 100 s while the restarted broker was ready. A new consumer
starts from the bootstrap servers.
It has no slot to lose (they went with the session) and sends no LeaveGroup; it joins under
the same instance id, so a rejoin asked meanwhile is still carried out once it is a member.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Literal
from urllib.parse import urlsplit

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from adapter.cluster.confirmations import Confirmations
from adapter.cluster.slot_writers import SlotWriters
from adapter.state.format_gate import client_id
from topology.client_stalls import STALLED_S, Stall
from topology.errors import TopologyError
from topology.group_members import Member, describe, member_url
from topology.kafka_client import KafkaAccess, denied
from topology.naming import owners_group, slots_topic

log = logging.getLogger(__name__)

POLL_S = 0.2
REFENCES = 10  # fences within the window that mean another live process has our instance id
REFENCE_WINDOW_S = 60.0
LEAVE_POLLS = 10  # after unsubscribe(): the revocation comes in the first, the rest is spare
UNJOINED_SESSIONS = 5  # sessions without membership before the consumer is made again

# How `_member` ended: stopped (or failed), fenced, or to be made again (renewing, unjoined).
Ending = Literal["stopped", "fenced", "renewed", "unjoined"]


class InstanceIdInUse(RuntimeError):
    """Another live process is the owners' group member with this instance's id."""


def unjoined_s(session_timeout_ms: int) -> float:
    """How long the owners' consumer may be subscribed without being a member before it is made
    again: five sessions, at least `STALLED_S`, so that a join waiting for a slow rebalance or a
    broker still starting is not cut short over and over."""
    return max(STALLED_S, UNJOINED_SESSIONS * session_timeout_ms / 1000)


def recent_fences(fences: list[float], now: float) -> list[float]:
    """The times the owners' consumer was fenced within `REFENCE_WINDOW_S`, `now` included."""
    return [at for at in fences if now - at < REFENCE_WINDOW_S] + [now]


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
        kafka: KafkaAccess,
        advertised_url: str,
        instance_id: str,
        session_timeout_ms: int,
        writers: SlotWriters,
        timeout_s: float,
        on_failure: Callable[[BaseException], None] = lambda _error: None,
    ) -> None:
        self.kafka = kafka
        self.topic = slots_topic(kafka.prefix)
        self.group = owners_group(kafka.prefix)
        self.url = advertised_url
        self.instance_id = instance_id
        self.writers = writers
        self.timeout_s = timeout_s
        self._confirmations = Confirmations(self.topic)
        owned: dict[str, Any] = {
            "group.id": self.group,
            "group.instance.id": instance_id,
            "client.id": client_id(advertised_url),  # with the newest format level it reads
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": session_timeout_ms,
            "heartbeat.interval.ms": heartbeat_ms(session_timeout_ms),
            "enable.auto.commit": False,
            "on_commit": self._confirmations.answered,
        }
        self._config = kafka.config(owned, "librdkafka.owners")
        self._unjoined_s = unjoined_s(session_timeout_ms)
        self._consumer: Consumer | None = None
        self._holding = threading.Lock()
        self._held: set[int] = set()  # the slots assigned to us, as the callbacks said
        self.joined = False
        self.refused: str | None = None  # an ACL's refusal, while it lasts
        self.member_id = ""
        self._stop = threading.Event()
        self._aside = threading.Event()  # out of the group while peers cannot reach us
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.on_failure = on_failure  # the thread died, or another process has our id
        # The group as described just before joining, by whoever needed it first (the start's
        # format level decision): the impostor check uses it instead of asking again.
        self.described: list[Member] | None = None
        self._renew = threading.Event()  # asked: make the consumer again (`renew`)
        self._rejoin = threading.Event()  # asked: leave the group and join again (`rejoin`)
        self._rejoin_waits = False  # asked while not a member: said so once, waiting for one
        # While renewing: the slots held when the old consumer closed (their writers kept),
        # until the new consumer's first assignment; and who waits for that assignment.
        self._kept: set[int] | None = None
        self._renewed: concurrent.futures.Future[None] | None = None

    async def start(self) -> None:
        """Join the group; slots arrive through the rebalance callbacks."""
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name="slot-owners", daemon=True)
        self._thread.start()

    async def close(self) -> None:
        """Leave the group (handing the slots over at once) and wait for the thread."""
        self._stop.set()
        thread = self._thread
        if thread is not None:
            began = time.monotonic()
            await asyncio.to_thread(thread.join, self.timeout_s * 2 + LEAVE_POLLS * POLL_S)
            log.info("left the owners' group in %.1f s", time.monotonic() - began)

    async def renew(self) -> bool:
        """Make the group's consumer again from the client's files (a rotated certificate),
        as the same static member; whether the new one was assigned its slots in time."""
        if self._thread is None or not self._thread.is_alive():
            return False
        renewed: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._renewed = renewed
        self._renew.set()
        try:
            await asyncio.wait_for(asyncio.wrap_future(renewed), self.timeout_s * 3)
        except TimeoutError:
            log.warning("the owners' consumer not yet assigned its slots after its renewal")
            return False
        return True

    def rejoin(self) -> None:
        """Leave the owners' group and join it again, so that it rebalances: a slot it handed
        to no member is handed out (`adapter/cluster/orphaned_slots.py`). Carried out by the
        polling thread, once the consumer is a member (see `_carry_out_rejoin`)."""
        self._rejoin.set()

    def step_aside(self, aside: bool) -> None:
        """Leave the owners' group (this instance's slots move to the others at once) or join
        it again; carried out by the polling thread (`adapter/cluster/reach.py` says when)."""
        if aside:
            self._aside.set()
        else:
            self._aside.clear()

    @property
    def aside(self) -> bool:
        return self._aside.is_set()

    def confirm(self, slot: int) -> bool:
        """Ask the group coordinator (blocking; for a writer's thread) whether we hold `slot`.

        A writer whose producer failed must not init a new one (fencing the slot's holder)
        unless the coordinator says this member still holds the slot: a resumed zombie would
        otherwise take its slot back from the rightful owner. The question is an offset
        commit for partition `slot` of the (empty) slots topic: the coordinator accepts it
        only from a member of the current generation (it accepts one for a partition the member
        no longer holds: the held-slots check before asking is what answers "no" for those).

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
        try:
            self._refuse_an_impostor()  # at start only: see the module's docstring
        except InstanceIdInUse as error:
            log.error("%s", error)
            self._fail(error)
            return
        fences: list[float] = []
        while not self._stop.is_set():
            ending = self._member()
            if ending == "stopped":
                return
            if ending != "fenced":
                continue  # renewing or unjoined: the same member again, with a new consumer
            fences = recent_fences(fences, time.monotonic())
            if len(fences) >= REFENCES:
                refused = InstanceIdInUse(
                    f"the owners' consumer was fenced {len(fences)} times within "
                    f"{REFENCE_WINDOW_S:.0f}s: another live process serves with instance id "
                    f"{self.instance_id!r}; give each instance its own instance_id"
                )
                log.error("%s", refused)
                self._fail(refused)
                return
            # Fenced by our own earlier membership (the group coordinator restarted or moved
            # while we rejoined), as far as can be told without describing the group.
            log.warning("the owners' consumer was fenced, by its own earlier membership; rejoining")

    def _member(self) -> Ending:
        """Be a member of the owners' group until stopped; how it ended (all but "stopped"
        make the consumer again)."""
        consumer = self.kafka.consumer(self._config)
        self._consumer = consumer
        subscribed = False
        failed = True
        ending: Ending = "stopped"
        unjoined = Stall(self._unjoined_s)
        try:
            while not self._stop.is_set():
                if subscribed == self._aside.is_set():
                    subscribed = self._subscribe(consumer, not subscribed)
                subscribed = self._carry_out_rejoin(consumer, subscribed)
                message = consumer.poll(POLL_S)
                self._note_refusal(message)
                _check(message)  # a rebalance callback's exception too
                self._confirmations.send(consumer)
                self.member_id = consumer.memberid() or ""
                if self._renew.is_set() and subscribed and self._kept is None:
                    self._renew.clear()
                    with self._holding:
                        self._kept = set(self._held)
                    ending = "renewed"  # closed without leaving; its revocation keeps the writers
                    break
                if unjoined.too_long(subscribed and not self.member_id, time.monotonic()):
                    log.warning(
                        "the owners' consumer has not been a member of the group for %.0fs: "
                        "making it again, from the bootstrap servers",
                        self._unjoined_s,
                    )
                    ending = "unjoined"  # no member id: closing it sends no LeaveGroup
                    break
            failed = False
        except InstanceIdInUse as error:
            log.warning("%s", error)
            return "fenced"
        except Exception as error:
            # Without this thread the instance owns no slot and never will again: stop it
            # (exit 1) so that it is restarted, rather than let it look ready.
            log.exception("the slot ownership consumer failed")
            self._fail(error)
        finally:
            self._close(consumer, leave=not failed and ending == "stopped")
        return ending

    def _subscribe(self, consumer: Consumer, subscribe: bool) -> bool:
        """Join the group, or leave it (the revocation and the LeaveGroup are served by the
        next polls); whether subscribed now."""
        if subscribe:
            consumer.subscribe(
                [self.topic], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._lost
            )
        else:
            consumer.unsubscribe()
        return subscribe

    def _note_refusal(self, message: Message | None) -> None:
        """Keep (and log once) an ACL's refusal of the group or the slots topic: readiness
        shows it while the instance owns no slot."""
        error = None if message is None else message.error()
        if error is None:
            return
        asked = {"Group": ("Read", self.group), "Topic": ("Describe", self.topic)}
        refusal = denied(error, asked)
        if refusal is not None and refusal != self.refused:
            self.refused = refusal
            log.warning("the owners' group: %s", refusal)
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self.writers.on_change)

    def _close(self, consumer: Consumer, leave: bool) -> None:
        """Close the consumer; on a clean stop, leave the group first (see the module doc)."""
        try:
            if leave:
                self._leave(consumer)
        except KafkaException:
            log.warning("leaving the owners' group failed", exc_info=True)
        finally:
            self._consumer = None
            self._confirmations.abandon()
            consumer.close()  # revokes every slot still held through _revoked
            self._release_unrevoked()

    def _carry_out_rejoin(self, consumer: Consumer, subscribed: bool) -> bool:
        """Leave the group if asked to rejoin (`rejoin`), to join again at the next turn;
        whether subscribed now.

        Only a member sends a LeaveGroup: a consumer whose session ended (its coordinator
        unreachable past `session.timeout.ms`, as while a lone broker restarts) has no member id
        until it joins again, and librdkafka then unsubscribes without one. Its next join, a
        static member's, is answered with the assignment the coordinator kept for our instance
        id, without a rebalance: leaving then would move nothing. So the rejoin waits until the
        consumer is a member again."""
        if not self._rejoin.is_set():
            return subscribed
        if subscribed and not consumer.memberid():
            if not self._rejoin_waits:
                self._rejoin_waits = True
                log.warning(
                    "asked to rejoin the owners' group while not a member of it (its session "
                    "ended and it has not joined again): it leaves once it is a member, as "
                    "leaving now would send no LeaveGroup and make no rebalance"
                )
            return subscribed
        self._rejoin.clear()
        self._rejoin_waits = False
        if subscribed:
            self._leave(consumer)
        return False

    def _leave(self, consumer: Consumer) -> None:
        """Leave the group: unsubscribe, then poll until the slots are revoked and the consumer
        is no member any more (librdkafka drops the member id as it queues the LeaveGroup; an
        unsubscribe asked during a rebalance waits for its end), then once more to send it."""
        consumer.unsubscribe()  # the revocation and the LeaveGroup are served in poll()
        for _ in range(LEAVE_POLLS):
            consumer.poll(POLL_S)
            with self._holding:
                if not self._held and not consumer.memberid():
                    break
        consumer.poll(POLL_S)  # sends the LeaveGroup, which close() alone would not

    def _release_unrevoked(self) -> None:
        """Lose what is still held once the consumer is closed, unless renewing (its writers are
        kept for the next consumer). A consumer fenced by another with our instance id (a peer
        removed us as gone while we were merely cut off) closes without any callback: its
        writers would otherwise stay ready for slots the group gave to others, and `confirm`
        would take a slot back for them once we rejoin, from its rightful owner."""
        if self._kept is not None:
            return
        with self._holding:
            left = sorted(self._held)
        if left:
            self._lost(None, [TopicPartition(self.topic, slot) for slot in left])

    def _refuse_an_impostor(self) -> None:
        """Refuse to start when our instance id is a member serving under another URL."""
        members, self.described = self.described, None
        try:
            if members is None:
                members = describe(self.kafka, self.group, self.timeout_s)
        except (KafkaException, TopologyError) as error:
            log.warning("cannot check the owners' group for our instance id: %s", error)
            return
        other = impostor(members, self.instance_id, self.url)
        if other is not None and not listening(other, self.timeout_s):
            # Our killed former incarnation under another URL: a `serve --workers` instance
            # restarted whole gives its workers new ports. Nothing serves there any more:
            # take its place, as under the same URL.
            log.warning(
                "instance id %r is held by %s, which no longer listens: taking its place",
                self.instance_id,
                other,
            )
            return
        if other is not None:
            raise InstanceIdInUse(
                f"instance id {self.instance_id!r} is already a member of {self.group} "
                f"serving {other}: give each instance its own instance_id (or, if that "
                f"instance is gone, wait for its session timeout to end)"
            )

    # The callbacks run on the consumer's thread, inside poll() or close().

    def _assigned(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.joined = True
        self.refused = None
        slots = sorted(tp.partition for tp in partitions)
        self._hold(slots, held=True)
        log.info("assigned write slots %s", slots)
        self._on_loop(self.writers.gain(slots), wait_s=None)
        kept, self._kept = self._kept, None
        if kept is not None:  # the first assignment of a renewed consumer
            if gone := sorted(kept - set(slots)):
                log.info("write slots %s went to others while the consumer was renewed", gone)
                self._on_loop(self.writers.lose(gone, self.timeout_s), wait_s=self.timeout_s * 2)
            renewed = self._renewed
            if renewed is not None and renewed.set_running_or_notify_cancel():
                renewed.set_result(None)  # not when `renew` stopped waiting (cancelled it)

    def _hold(self, slots: list[int], held: bool) -> None:
        with self._holding:
            if held:
                self._held.update(slots)
            else:
                self._held.difference_update(slots)

    def _revoked(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        slots = sorted(tp.partition for tp in partitions)
        self._hold(slots, held=False)  # from now on no writer of these may re-init
        if self._kept is not None:
            return  # the consumer being renewed: the member, and so its slots, stay
        log.info("revoked write slots %s", slots)
        # Finishing the transactions in flight before the new owner fences them spares
        # their clients a 503; waiting here holds the rebalance back for that long at most.
        self._on_loop(self.writers.lose(slots, self.timeout_s), wait_s=self.timeout_s * 2)

    def _lost(self, _consumer: Consumer | None, partitions: list[TopicPartition]) -> None:
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


def impostor(members: Iterable[Member], instance_id: str, url: str) -> str | None:
    """The URL another process serves under while holding our instance id, if any.

    The same URL is our own former incarnation (killed, not yet expired): taking its place is
    what static membership is for.
    """
    for member in members:
        if member.group_instance_id == instance_id and member_url(member.client_id) != url:
            return member_url(member.client_id)
    return None


def listening(url: str, timeout_s: float) -> bool:
    """Whether something accepts connections at `url`; only a refused connection says no (a
    process killed with its listener), anything else (a timeout, no route) counts as yes."""
    return accepts(url, timeout_s) is not False


def accepts(url: str, timeout_s: float) -> bool | None:
    """Whether a connection to `url` is accepted (True: something listens, even a paused
    process, whose kernel completes the handshake) or refused (False: nothing listens); None
    when that cannot be told (no answer within `timeout_s`, no route, a URL without a port)."""
    parts = urlsplit(url)
    if parts.hostname is None or parts.port is None:
        return None
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=timeout_s):
            return True
    except ConnectionRefusedError:
        return False
    except OSError:
        return None


def _check(message: Message | None) -> None:
    """Raise on a fatal consumer error (the only one: fenced by a member with our id)."""
    error = None if message is None else message.error()
    if error is None:
        return
    if error.code() == KafkaError._FATAL or error.fatal():
        raise InstanceIdInUse(
            f"the owners' consumer was fenced: {error.str()} (another member with this "
            "instance's id joined: our own earlier membership, or another process)"
        )
    log.debug("owners' consumer: %s", error.str())
