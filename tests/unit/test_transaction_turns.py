"""Turns at writing: at most `limit` transactions at once, first come first served, and no wait
longer than the patience."""

from __future__ import annotations

import asyncio

import pytest

from adapter.log.transaction_turns import Turns


async def _hold(turns: Turns, name: str, log: list[str], release: asyncio.Event) -> None:
    async with turns.turn():
        log.append(f"+{name}")
        await release.wait()
        log.append(f"-{name}")


def _holder(turns: Turns, name: str, log: list[str]) -> tuple[asyncio.Task[None], asyncio.Event]:
    """A slot that takes a turn and holds it until its event is set."""
    release = asyncio.Event()
    return asyncio.create_task(_hold(turns, name, log, release)), release


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_no_more_than_the_limit_hold_a_turn_and_the_next_waits_in_order() -> None:
    turns, log = Turns(2, patience_s=60), list[str]()
    gates = {name: asyncio.Event() for name in "abcd"}
    tasks = [asyncio.create_task(_hold(turns, n, log, gates[n])) for n in "abcd"]
    await _settle()
    assert log == ["+a", "+b"]
    assert turns.running == 2
    gates["b"].set()
    await _settle()
    assert log == ["+a", "+b", "-b", "+c"]
    assert turns.running == 2
    for gate in gates.values():
        gate.set()
    await asyncio.gather(*tasks)
    assert log.index("+d") > log.index("+c")
    assert len(log) == 8
    assert turns.running == 0


async def test_a_turn_freed_is_not_taken_by_a_newcomer_ahead_of_a_waiter() -> None:
    turns, log = Turns(1, patience_s=60), list[str]()
    holding, first = _holder(turns, "a", log)
    await _settle()
    waiting, second = _holder(turns, "b", log)
    await _settle()
    first.set()
    newcomer, third = _holder(turns, "c", log)
    await _settle()
    assert log == ["+a", "-a", "+b"]
    assert turns.running == 1
    second.set()
    third.set()
    await asyncio.gather(holding, waiting, newcomer)
    assert log == ["+a", "-a", "+b", "-b", "+c", "-c"]
    assert turns.running == 0


async def test_a_slot_that_waited_its_patience_goes_anyway() -> None:
    """A transaction stuck on a moving partition leader must not stop the other slots."""
    turns, log = Turns(1, patience_s=0.05), list[str]()
    holding, stuck = _holder(turns, "stuck", log)
    await _settle()
    going, other = _holder(turns, "other", log)
    await asyncio.sleep(0.2)
    assert log == ["+stuck", "+other"]
    assert turns.running == 2
    other.set()
    await going
    stuck.set()
    await holding
    assert turns.running == 0


async def test_a_waiter_cancelled_leaves_the_queue() -> None:
    turns, log = Turns(1, patience_s=60), list[str]()
    holding, first = _holder(turns, "a", log)
    await _settle()
    cancelled, _never = _holder(turns, "b", log)
    waiting, last = _holder(turns, "c", log)
    await _settle()
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    first.set()
    await _settle()
    assert log == ["+a", "-a", "+c"]
    last.set()
    await asyncio.gather(holding, waiting)
    assert turns.running == 0


async def test_a_turn_handed_to_a_waiter_cancelled_at_that_moment_goes_to_the_next() -> None:
    turns, log = Turns(1, patience_s=60), list[str]()
    async with turns.turn():
        handed, _never = _holder(turns, "b", log)
        waiting, last = _holder(turns, "c", log)
        await _settle()
    handed.cancel()  # in the same step as the turn ending: b was handed it, and never ran
    with pytest.raises(asyncio.CancelledError):
        await handed
    await _settle()
    assert log == ["+c"]
    assert turns.running == 1
    last.set()
    await waiting
    assert turns.running == 0


async def test_no_limit_never_waits() -> None:
    turns, log = Turns(0), list[str]()
    release = asyncio.Event()
    tasks = [asyncio.create_task(_hold(turns, str(n), log, release)) for n in range(50)]
    await _settle()
    assert len(log) == 50
    assert turns.running == 50
    release.set()
    await asyncio.gather(*tasks)
    assert turns.running == 0
