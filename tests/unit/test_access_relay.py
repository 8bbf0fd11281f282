"""Reads of another instance's stream are told to its owner (not to a sibling worker, not by
an instance that owns every slot, only for a sliding TTL) at most once per quarter of the TTL,
and a read in between is told when that quarter ends."""

from __future__ import annotations

import asyncio

import pytest

from adapter.cluster.access_relay import AccessRelay, Tell, owner_to_tell
from adapter.cluster.routing import Forward, Local, Moving, Route, Router
from adapter.cluster.slot_writers import SlotWriters
from adapter.log.writer import StateEntry, WriterLimits
from adapter.protocol.model import StreamMeta
from adapter.tasks import Tasks
from topology.kafka_client import KafkaAccess

KEY = ("_default", "s")
OWNER = "http://10.0.0.2:4437"
SIBLING = "http://10.0.0.1:4438"
SLIDING = StreamMeta("_default", "s", 0, "text/plain", 0, 0, 0, 0, 0, ttl_seconds=60)


def _relay(entries: int = 10_000) -> AccessRelay:
    """A relay of an instance that owns no slot yet (nothing is connected to build one)."""
    writers = SlotWriters(
        KafkaAccess("unused:9092", "p.", {}),
        4,
        WriterLimits(1.0, 1024),
        catch_up=_nothing,
        may_reinit=lambda _slot: False,
        announce=_never,
        tasks=Tasks(),
    )
    router = Router(writers, lambda _slot: OWNER, "http://10.0.0.1:4437")
    return AccessRelay(router, Tasks(), (), entries)


async def _nothing() -> None:
    return None


def _never(slot: int) -> StateEntry:
    raise AssertionError(f"slot {slot} announced")


@pytest.mark.parametrize(
    ("meta", "accepting_all", "route", "told"),
    [
        (SLIDING, False, Forward(3, OWNER), OWNER),
        (SLIDING.evolve(ttl_seconds=None), False, Forward(3, OWNER), None),  # nothing slides
        (SLIDING.evolve(ttl_seconds=None, expires_at_ms=9), False, Forward(3, OWNER), None),
        (SLIDING, True, Forward(3, OWNER), None),  # every slot is ours: we are the owner
        (SLIDING, False, Local(3), None),
        (SLIDING, False, Moving(3), None),  # no owner to tell
        (SLIDING, False, Forward(3, SIBLING), None),  # a sibling was asked before the read
    ],
)
def test_a_read_is_told_to_another_instance_owning_a_sliding_ttl_only(
    meta: StreamMeta, accepting_all: bool, route: Route, told: str | None
) -> None:
    assert owner_to_tell(meta, accepting_all, route, {SIBLING}) == told


async def test_a_read_asks_the_owner_as_its_reader_and_is_throttled() -> None:
    asked: list[str] = []

    async def reader(owner: str) -> None:
        asked.append(owner)

    relay = _relay()
    relay.read(SLIDING, 3, reader)
    relay.read(SLIDING, 3, reader)  # within the quarter: told when it ends
    relay.read(SLIDING.evolve(ttl_seconds=None), 3, reader)  # no sliding TTL: not told
    await asyncio.sleep(0.01)  # the first telling is done, the second waits for its quarter
    assert asked == [OWNER]
    assert (relay.remembered(), relay.pending()) == (1, 1)
    await relay.close()


async def test_a_read_is_told_at_once_and_reads_in_between_once_when_the_quarter_ends() -> None:
    told: list[str] = []
    renewals = _relay()

    def tell(label: str) -> Tell:
        async def send() -> None:
            told.append(label)

        return send

    renewals.throttled(KEY, 0.4, tell("first"))  # a quarter is 0.1 s
    await asyncio.sleep(0)
    assert told == ["first"]
    for i in range(5):  # within the quarter: one telling, when it ends
        renewals.throttled(KEY, 0.4, tell(f"between{i}"))
    await asyncio.sleep(0)
    assert told == ["first"]
    assert renewals.pending() == 1
    await asyncio.sleep(0.3)
    assert told == ["first", "between0"]
    renewals.throttled(KEY, 0.4, tell("after"))  # its quarter ended: at once
    await asyncio.sleep(0)
    assert told == ["first", "between0", "after"]
    renewals.throttled(("_default", "other"), 0.4, tell("other"))  # each stream on its own
    await asyncio.sleep(0)
    assert told[-1] == "other"
    await renewals.close()


async def test_closing_cancels_a_telling_that_waits_for_its_quarter() -> None:
    told: list[int] = []
    renewals = _relay()

    async def send() -> None:
        told.append(1)

    renewals.throttled(KEY, 0.4, send)
    await asyncio.sleep(0)
    renewals.throttled(KEY, 0.4, send)  # waits for the quarter's end (0.1 s)
    await renewals.close()
    await asyncio.sleep(0.3)
    assert told == [1]


async def test_streams_remembered_are_bounded_and_the_oldest_is_forgotten() -> None:
    """With TTLs so long that no quarter ends, memory still stops at `entries` streams."""
    told: list[str] = []
    renewals = _relay(entries=3)

    def tell(label: str) -> Tell:
        async def send() -> None:
            told.append(label)

        return send

    day = 86_400.0
    for i in range(10):
        renewals.throttled(("_default", f"s{i}"), day, tell(f"s{i}"))
        assert renewals.remembered() <= 3
    await asyncio.sleep(0)
    assert told == [f"s{i}" for i in range(10)]
    renewals.throttled(("_default", "s0"), day, tell("s0 again"))  # forgotten: told at once
    await asyncio.sleep(0)
    assert told[-1] == "s0 again"
    assert renewals.remembered() == 3
    await renewals.close()


async def test_a_forgotten_stream_s_waiting_telling_is_sent_at_once() -> None:
    told: list[str] = []
    renewals = _relay(entries=1)

    def tell(label: str) -> Tell:
        async def send() -> None:
            told.append(label)

        return send

    day = 86_400.0
    renewals.throttled(KEY, day, tell("first"))
    renewals.throttled(KEY, day, tell("between"))  # waits a quarter of a day
    renewals.throttled(("_default", "other"), day, tell("other"))  # KEY is forgotten
    await asyncio.sleep(0)
    assert sorted(told) == ["between", "first", "other"]
    await asyncio.sleep(0.01)  # the tellings' tasks are dropped once done
    assert renewals.pending() == 0  # nothing left waiting for a quarter to end
    await renewals.close()


async def test_closing_cancels_and_awaits_a_telling_in_flight() -> None:
    ended: list[str] = []
    renewals = _relay()

    async def send() -> None:
        try:
            await asyncio.sleep(3600)  # an owner that does not answer
        finally:
            ended.append("telling")

    renewals.throttled(KEY, 0.4, send)
    await asyncio.sleep(0)
    assert renewals.pending() == 1
    await asyncio.wait_for(renewals.close(), 5)
    assert ended == ["telling"]
    assert renewals.pending() == 0


async def test_tellings_running_at_once_are_bounded_and_an_untold_read_is_told_next_time() -> None:
    release = asyncio.Event()
    told: list[str] = []
    renewals = _relay()
    renewals._max_tellings = 2

    def tell(label: str) -> Tell:
        async def send() -> None:
            told.append(label)
            await release.wait()

        return send

    for stream in ("a", "b", "c"):
        renewals.throttled(("_default", stream), 60, tell(stream))
    await asyncio.sleep(0)
    assert (told, renewals.remembered()) == (["a", "b"], 2)  # `c` not told, not remembered
    release.set()
    await asyncio.sleep(0.01)
    renewals.throttled(("_default", "c"), 60, tell("c"))  # room again: told at once
    await asyncio.sleep(0)
    assert told == ["a", "b", "c"]
    await renewals.close()
