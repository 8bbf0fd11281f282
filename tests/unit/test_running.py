"""An instance's parts close in the reverse of their start, each even when another fails to
close; a background task that ends before close is logged and ends serving; close cancels and
awaits the tasks where they were opened among the parts."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable

import pytest

from adapter.running import Running


class _Part:
    """A part whose close (sync, or async when `waits`) is recorded in `closed`."""

    def __init__(self, name: str, closed: list[str], waits: bool = False) -> None:
        self.name, self.closed, self.waits = name, closed, waits
        self.starts = 0

    async def start(self) -> None:
        self.starts += 1

    def close(self) -> Awaitable[None] | None:
        if self.waits:
            return self._close()
        self.closed.append(self.name)
        return None

    async def _close(self) -> None:
        self.closed.append(self.name)


async def test_parts_close_last_started_first_even_when_one_fails(
    caplog: pytest.LogCaptureFixture,
) -> None:
    running, closed = Running(), []

    class Broken(_Part):
        def close(self) -> None:
            closed.append("broken")
            raise OSError("the file is gone")

    running.opened("catalog", _Part("catalog", closed))
    running.opened("broken", Broken("broken", closed))
    reader = _Part("reader", closed, waits=True)
    await running.start("reader", reader)
    assert reader.starts == 1
    await running.close()
    assert closed == ["reader", "broken", "catalog"]
    assert "closing broken failed" in caplog.text
    await running.close()  # closed once: nothing is closed again
    assert closed == ["reader", "broken", "catalog"]


async def test_a_task_that_raises_is_logged_and_ends_serving(
    caplog: pytest.LogCaptureFixture,
) -> None:
    running = Running()

    async def tiering() -> None:
        raise RuntimeError("bug")

    running.spawn(tiering(), "tier-worker")
    error = await asyncio.wait_for(running.fatal, 5)
    assert str(error) == "bug"
    assert any(
        r.levelno == logging.ERROR and "tier-worker ended: bug" in r.getMessage()
        for r in caplog.records
    )


async def test_a_task_that_returns_ends_serving_too() -> None:
    running = Running()

    async def follower() -> None:
        return None

    running.spawn(follower(), "follower")
    assert str(await asyncio.wait_for(running.fatal, 5)) == "follower stopped"


async def test_only_the_first_failure_is_kept() -> None:
    running = Running()
    running.fail(RuntimeError("first"))
    running.fail(RuntimeError("second"))
    assert str(running.fatal.result()) == "first"


async def test_close_cancels_and_awaits_the_tasks_in_their_place() -> None:
    running, order = Running(), []
    started = asyncio.Event()

    async def forever() -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        finally:
            order.append("task ended")

    running.opened("follower", _Part("follower", order))
    running.opened("background tasks", running.tasks)
    running.opened("writers", _Part("writers", order))
    task = running.spawn(forever(), "sweeper")
    await started.wait()
    await running.close()
    assert order == ["writers", "task ended", "follower"]
    assert task.cancelled()
    assert not running.fatal.done()  # a task cancelled at close is no failure


async def test_a_close_that_never_ends_is_left_after_its_budget_and_the_next_closes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    running, closed = Running(close_budget_s=0.05), list[str]()

    class Stuck(_Part):
        async def close(self) -> None:
            await asyncio.Event().wait()  # a Kafka call that never answers

    running.opened("catalog", _Part("catalog", closed))
    running.opened("slot writers", Stuck("slot writers", closed))
    await asyncio.wait_for(running.close(), 5)
    assert closed == ["catalog"]
    assert "closing slot writers did not finish within 0 s" in caplog.text
