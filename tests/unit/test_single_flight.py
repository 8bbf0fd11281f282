"""`Fresh`: a shared call whose result is never older than the question."""

from __future__ import annotations

import asyncio

import pytest

from adapter.state.single_flight import Fresh


class Calls:
    def __init__(self) -> None:
        self.started = 0
        self.release = asyncio.Event()
        self.fail = False

    async def __call__(self) -> int:
        self.started += 1
        number = self.started
        await self.release.wait()
        if self.fail:
            raise RuntimeError(f"call {number}")
        return number


async def _turns() -> None:
    """Let every ready task run as far as it can."""
    for _ in range(10):
        await asyncio.sleep(0)


async def test_callers_during_a_call_share_the_next_one_not_the_running_one() -> None:
    calls = Calls()
    fresh = Fresh(calls)
    first = asyncio.create_task(fresh.get())
    await _turns()
    assert calls.started == 1
    later = [asyncio.create_task(fresh.get()) for _ in range(50)]
    await _turns()
    assert calls.started == 1  # queued behind the running call, not joined to it
    calls.release.set()
    assert await first == 1
    assert set(await asyncio.gather(*later)) == {2}  # one more call for all fifty
    assert calls.started == 2


async def test_a_caller_after_everything_settled_starts_a_new_call() -> None:
    calls = Calls()
    calls.release.set()
    fresh = Fresh(calls)
    assert await fresh.get() == 1
    assert await fresh.get() == 2


async def test_a_failure_reaches_the_callers_that_shared_it_and_not_the_next() -> None:
    calls = Calls()
    fresh = Fresh(calls)
    calls.fail = True
    sharing = [asyncio.create_task(fresh.get()) for _ in range(3)]
    await _turns()
    calls.release.set()
    for task in sharing:
        with pytest.raises(RuntimeError, match="call 1"):
            await task
    calls.fail = False
    assert await fresh.get() == 2


async def test_a_cancelled_caller_does_not_cancel_the_call_others_wait_for() -> None:
    calls = Calls()
    fresh = Fresh(calls)
    gone, staying = asyncio.create_task(fresh.get()), asyncio.create_task(fresh.get())
    await _turns()
    gone.cancel()
    await _turns()
    calls.release.set()
    assert await staying == 1
