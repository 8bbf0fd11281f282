"""A task group logs a crash once and reports it to its owner's `on_failure`; a job's return and
a cancelled task are no crash; closing cancels and awaits every task, within its budget even
when a task ignores the cancel; nothing spawned after close runs."""

from __future__ import annotations

import asyncio
import logging

import pytest

from adapter.tasks import Kind, Tasks


def _group() -> tuple[Tasks, list[BaseException]]:
    failures: list[BaseException] = []
    return Tasks(failures.append, close_budget_s=5), failures


async def _raise(error: BaseException) -> None:
    raise error


async def _return() -> None:
    return None


async def _ended(task: asyncio.Task[None]) -> None:
    await asyncio.wait([task])
    await asyncio.sleep(0)  # done callbacks run on the next turn of the loop


def _crashes_logged(caplog: pytest.LogCaptureFixture, name: str) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.levelno == logging.ERROR and f"background task {name} ended" in r.getMessage()
    ]


@pytest.mark.parametrize("kind", list(Kind))
async def test_a_task_that_raises_is_logged_once_with_its_traceback_and_reported(
    caplog: pytest.LogCaptureFixture, kind: Kind
) -> None:
    tasks, failures = _group()
    await _ended(tasks.spawn(_raise(RuntimeError("bug")), "writer-0", kind))
    assert [str(error) for error in failures] == ["bug"]
    [logged] = _crashes_logged(caplog, "writer-0")
    assert "writer-0 ended: bug" in logged.getMessage()
    assert logged.exc_info is not None
    assert logged.exc_info[1] is failures[0]
    assert len(tasks) == 0  # no reference kept to a task that ended


async def test_a_service_that_returns_is_a_crash_but_a_job_that_returns_is_not(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tasks, failures = _group()
    await _ended(tasks.spawn(_return(), "gain-1", Kind.JOB))
    assert failures == []
    assert _crashes_logged(caplog, "gain-1") == []
    await _ended(tasks.spawn(_return(), "writer-1", Kind.SERVICE))
    assert [str(error) for error in failures] == ["writer-1 stopped"]
    assert len(_crashes_logged(caplog, "writer-1")) == 1


async def test_a_crash_in_a_group_without_on_failure_is_only_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tasks = Tasks()
    await _ended(tasks.spawn(_raise(OSError("unreachable")), "tell-b/s", Kind.JOB))
    assert len(_crashes_logged(caplog, "tell-b/s")) == 1


async def test_without_tracebacks_a_crash_is_one_line(caplog: pytest.LogCaptureFixture) -> None:
    tasks = Tasks(tracebacks=False)
    await _ended(tasks.spawn(_raise(RuntimeError("refused")), "supervisor"))
    [logged] = _crashes_logged(caplog, "supervisor")
    assert logged.exc_info is None


async def test_a_task_cancelled_by_its_owner_is_no_crash(caplog: pytest.LogCaptureFixture) -> None:
    tasks, failures = _group()
    task = tasks.spawn(asyncio.sleep(3600), "writer-2")
    await asyncio.sleep(0)
    task.cancel()  # its slot was retired
    await _ended(task)
    assert (failures, _crashes_logged(caplog, "writer-2"), len(tasks)) == ([], [], 0)


async def test_cancel_ends_the_tasks_of_one_kind_only() -> None:
    tasks, failures = _group()
    writer = tasks.spawn(asyncio.sleep(3600), "writer-0")
    gain = tasks.spawn(asyncio.sleep(3600), "gain-1", Kind.JOB)
    await asyncio.sleep(0)
    tasks.cancel(Kind.JOB)
    await _ended(gain)
    assert gain.cancelled()
    assert not writer.done()
    await tasks.close()
    assert writer.cancelled()
    assert failures == []


async def test_close_cancels_and_awaits_every_task() -> None:
    tasks, failures = _group()
    ended: list[str] = []

    async def forever(name: str) -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            ended.append(name)

    spawned = [tasks.spawn(forever(n), n, k) for n, k in (("a", Kind.SERVICE), ("b", Kind.JOB))]
    await asyncio.sleep(0)
    await tasks.close()
    assert sorted(ended) == ["a", "b"]  # their cleanups ran before close returned
    assert all(task.cancelled() for task in spawned)
    assert (failures, len(tasks)) == ([], 0)


async def test_close_is_bounded_when_a_task_ignores_its_cancel(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tasks = Tasks(close_budget_s=0.05)
    release = asyncio.Event()

    async def stubborn() -> None:
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                continue  # a thread's call that cannot be interrupted, say

    task = tasks.spawn(stubborn(), "stubborn")
    await asyncio.sleep(0)
    await asyncio.wait_for(tasks.close(), 5)
    assert not task.done()
    assert "tasks ['stubborn'] did not end within 0 s" in caplog.text
    release.set()
    await asyncio.wait_for(task, 5)


async def test_nothing_spawned_after_close_runs() -> None:
    tasks, failures = _group()
    await tasks.close()
    ran: list[str] = []

    async def late() -> None:
        ran.append("late")

    task = tasks.spawn(late(), "gain-3", Kind.JOB)
    await asyncio.wait([task])
    assert task.cancelled()
    assert ran == []
    assert failures == []


async def test_wait_lets_the_tasks_end_of_themselves() -> None:
    tasks, _ = _group()
    closing = tasks.spawn(asyncio.sleep(0.01), "close-mount-m", Kind.JOB)
    await tasks.wait(5)
    assert closing.done()
    assert not closing.cancelled()
