"""An owner whose membership of the owners' group is taken while it is alive (a peer removed it
as gone while it was merely cut off from its peers) loses its slots at once: its consumer is
fenced and closes without any rebalance callback, and its writers must not stay ready for
slots the group has given to others. After a lone broker's restart the owner joins again and
carries out a rejoin asked meanwhile; a consumer no member for too long is made again."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from adapter.cluster.ownership import SlotOwnership, unjoined_s
from adapter.cluster.slot_writers import SlotWriters
from adapter.log.writer import WriterLimits
from adapter.tasks import Tasks
from devstack import kafka as broker
from devstack.process import free_port
from tests.services import DISCARD_S
from topology import group_eviction
from topology.internal_records import owner_key
from topology.kafka_client import KafkaAccess
from topology.naming import owners_group, slots_topic

pytestmark = pytest.mark.integration

LIMITS = WriterLimits(timeout_s=5, max_message_bytes=1 << 20)
URL = "http://127.0.0.1:9/"  # the owner's advertised address (nothing is forwarded here)
SLOTS = 2
SESSION_MS = 6000
WITHIN_S = 30.0
# After a restarted broker is ready: its group coordinator loads, the member reconnects (with
# librdkafka's back-off), joins, leaves and joins again. A loaded CI machine took over 30 s.
REJOINED_WITHIN_S = 90.0


class _Recorded(SlotWriters):
    """The slot writers, each gain and loss of slots noted in order."""

    changes: list[tuple[str, list[int]]]

    async def gain(self, slots: list[int]) -> None:
        self.changes.append(("gain", sorted(slots)))
        await super().gain(slots)

    async def lose(self, slots: list[int], drain_s: float) -> None:
        self.changes.append(("lose", sorted(slots)))
        await super().lose(slots, drain_s)


async def _caught_up() -> None:
    return None


async def _owner(bootstrap: str, prefix: str, instance_id: str) -> tuple[SlotOwnership, _Recorded]:
    """The group's member `instance_id` and its slot writers (not started), on a fresh prefix."""
    owners = f"{prefix}owners-records"  # where the writers announce themselves
    admin = AdminClient({"bootstrap.servers": bootstrap})
    made = admin.create_topics([NewTopic(slots_topic(prefix), SLOTS, 1), NewTopic(owners, 1, 1)])
    for future in made.values():
        await asyncio.to_thread(future.result, 10)
    access = KafkaAccess(bootstrap, prefix)
    ownership: SlotOwnership | None = None
    writers = _Recorded(
        access,
        SLOTS,
        LIMITS,
        _caught_up,
        may_reinit=lambda slot: ownership is not None and ownership.confirm(slot),
        announce=lambda slot: (owners, owner_key(slot), b"owner"),
        tasks=Tasks(),
    )
    writers.changes = []
    ownership = SlotOwnership(access, URL, instance_id, SESSION_MS, writers, LIMITS.timeout_s)
    return ownership, writers


async def _until(check: object, what: str, within_s: float = WITHIN_S) -> None:
    deadline = time.monotonic() + within_s
    while not callable(check) or not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"never {what}")
        await asyncio.sleep(0.1)


async def test_an_owner_whose_membership_is_taken_loses_its_slots(
    kafka_bootstrap: str, unique: str
) -> None:
    prefix = f"taken{unique}."
    ownership, writers = await _owner(kafka_bootstrap, prefix, "taken-1")
    try:
        await ownership.start()
        await _until(writers.accepting_all, "accepted every slot")
        before = len(writers.changes)
        removed = await asyncio.to_thread(
            group_eviction.evict,
            ownership.kafka,
            owners_group(prefix),
            slots_topic(prefix),
            URL,
            SESSION_MS,
            10.0,
        )
        assert removed == ["taken-1"]
        # Its consumer fenced: every slot it held is lost at once, before it joins again (then
        # it gains them back, as the group's only member).
        await _until(lambda: len(writers.changes) > before, "changed its slots once fenced")
        assert writers.changes[before] == ("lose", [0, 1]), writers.changes
    finally:
        await ownership.close()
        await writers.close()


@pytest.mark.faults
@pytest.mark.timeout(240)
async def test_a_rejoin_asked_while_not_a_member_is_carried_out_once_a_member(
    tmp_path: Path,
) -> None:
    """A lone broker restarting ends the member's session; the orphaned-slot check may ask it to
    rejoin before it has joined again. Leaving then sends no LeaveGroup (it has no member id),
    and its next join, a static member's, takes back the assignment the coordinator kept,
    without a rebalance: the rejoin must wait until it is a member, then make the group
    rebalance (the member leaves: its slots revoked, then assigned again)."""
    async with _session_lost(tmp_path, "restart") as (node, ownership, writers):
        ownership.rejoin()  # not a member: no member id until it joins again
        await asyncio.sleep(1)  # the polling thread's turn, with the broker still away
        back = len(writers.changes)
        await asyncio.to_thread(broker.start, node)
        await _until(
            lambda: len(writers.changes) >= back + 3, "rejoined once a member", REJOINED_WITHIN_S
        )
        # Taken back as kept, then the rejoin: revoked by leaving, assigned by the rebalance.
        assert writers.changes[back : back + 3] == [
            ("gain", [0, 1]),
            ("lose", [0, 1]),
            ("gain", [0, 1]),
        ], writers.changes
        await _until(writers.accepting_all, "accepted every slot again")


@pytest.mark.faults
@pytest.mark.timeout(240)
async def test_a_consumer_no_member_for_too_long_is_made_again_and_gets_its_slots_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """librdkafka can drop every broker for good as a lone broker shuts down (the consumer then
    never connects again): a consumer that has been no member for `unjoined_s` is made again,
    from the bootstrap servers, and takes its slots back as the same static member once the
    broker is back."""
    caplog.set_level(logging.WARNING, logger="adapter.cluster.ownership")
    async with _session_lost(tmp_path, "unjoined") as (node, _ownership, writers):
        await _until(
            lambda: _made_again(caplog),
            "made its consumer again",
            unjoined_s(SESSION_MS) + WITHIN_S,
        )
        back = len(writers.changes)
        await asyncio.to_thread(broker.start, node)
        await _until(lambda: len(writers.changes) > back, "joined again", REJOINED_WITHIN_S)
        assert writers.changes[back] == ("gain", [0, 1]), writers.changes
        await _until(writers.accepting_all, "accepted every slot again")


@asynccontextmanager
async def _session_lost(
    tmp_path: Path, name: str
) -> AsyncIterator[tuple[broker.KafkaNode, SlotOwnership, _Recorded]]:
    """An owner of every slot on a lone broker of its own, once that broker is stopped and
    the owner's session has ended (its slots lost): (the broker, to start again, the owner,
    its writers)."""
    node = broker.KafkaNode(home=tmp_path / "kafka", port=free_port(), controller_port=free_port())
    bootstrap = await asyncio.to_thread(broker.start, node)
    try:
        ownership, writers = await _owner(bootstrap, f"{name}.", f"{name}-1")
        try:
            await ownership.start()
            await _until(writers.accepting_all, "accepted every slot")
            await asyncio.to_thread(broker.stop, node)
            await _until(lambda: writers.changes[-1] == ("lose", [0, 1]), "lost its session")
            yield node, ownership, writers
        finally:
            await ownership.close()
            await writers.close()
    finally:
        await asyncio.to_thread(broker.stop, node, DISCARD_S)


def _made_again(caplog: pytest.LogCaptureFixture) -> bool:
    return any("making it again" in record.getMessage() for record in caplog.records)
