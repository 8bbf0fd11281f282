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
