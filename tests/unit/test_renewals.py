"""Reads of another instance's stream are told to its owner at most once per quarter of the
TTL, and a read in between is told when that quarter ends."""

from __future__ import annotations

import asyncio

from adapter.http.renewals import OwnerRenewals, Tell

KEY = ("_default", "s")


async def test_a_read_is_told_at_once_and_reads_in_between_once_when_the_quarter_ends() -> None:
    told: list[str] = []
    renewals = OwnerRenewals()

    def tell(label: str) -> Tell:
        async def send() -> None:
            told.append(label)

        return send

    renewals.read(KEY, 0.4, tell("first"))  # a quarter is 0.1 s
    await asyncio.sleep(0)
    assert told == ["first"]
    for i in range(5):  # within the quarter: one telling, when it ends
        renewals.read(KEY, 0.4, tell(f"between{i}"))
    await asyncio.sleep(0)
    assert told == ["first"]
    assert renewals.pending() == 1
    await asyncio.sleep(0.3)
    assert told == ["first", "between0"]
    renewals.read(KEY, 0.4, tell("after"))  # its quarter ended: at once
    await asyncio.sleep(0)
    assert told == ["first", "between0", "after"]
    renewals.read(("_default", "other"), 0.4, tell("other"))  # each stream on its own
    await asyncio.sleep(0)
    assert told[-1] == "other"
    await renewals.close()


async def test_closing_cancels_a_telling_that_waits_for_its_quarter() -> None:
    told: list[int] = []
    renewals = OwnerRenewals()

    async def send() -> None:
        told.append(1)

    renewals.read(KEY, 0.4, send)
    await asyncio.sleep(0)
    renewals.read(KEY, 0.4, send)  # waits for the quarter's end (0.1 s)
    await renewals.close()
    await asyncio.sleep(0.3)
    assert told == [1]


async def test_streams_remembered_are_bounded_and_the_oldest_is_forgotten() -> None:
    """With TTLs so long that no quarter ends, memory still stops at `entries` streams."""
    told: list[str] = []
    renewals = OwnerRenewals(entries=3)

    def tell(label: str) -> Tell:
        async def send() -> None:
            told.append(label)

        return send

    day = 86_400.0
    for i in range(10):
        renewals.read(("_default", f"s{i}"), day, tell(f"s{i}"))
        assert renewals.remembered() <= 3
    await asyncio.sleep(0)
    assert told == [f"s{i}" for i in range(10)]
    renewals.read(("_default", "s0"), day, tell("s0 again"))  # forgotten: told at once
    await asyncio.sleep(0)
    assert told[-1] == "s0 again"
    assert renewals.remembered() == 3
    await renewals.close()


async def test_a_forgotten_stream_s_waiting_telling_is_sent_at_once() -> None:
    told: list[str] = []
    renewals = OwnerRenewals(entries=1)

    def tell(label: str) -> Tell:
        async def send() -> None:
            told.append(label)

        return send

    day = 86_400.0
    renewals.read(KEY, day, tell("first"))
    renewals.read(KEY, day, tell("between"))  # waits a quarter of a day
    renewals.read(("_default", "other"), day, tell("other"))  # KEY is forgotten
    await asyncio.sleep(0)
    assert sorted(told) == ["between", "first", "other"]
    await asyncio.sleep(0.01)  # the tellings' tasks are dropped once done
    assert renewals.pending() == 0  # nothing left waiting for a quarter to end
    await renewals.close()
