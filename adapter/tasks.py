"""The background tasks of one owner (a part, or the instance): named, held, a crash logged
once and reported, every task cancelled and awaited within a budget when the owner closes.

A task is of one of two kinds. A `SERVICE` runs until its owner closes it (a slot's writer, the
meta follower): any end before that, returned or raised, is a crash. A `JOB` ends when its work
is done (a renewal, a telling, one delivery to SSE sessions): returning is its normal end, and
only raising is a crash. A crash is logged once, with its traceback, and passed to the group's
`on_failure` when it has one: the owner cannot work without that task (a dead slot writer
stops the process); without one the crash is only logged. A task cancelled is no crash: that
is how an owner ends its tasks.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable, Coroutine
from typing import Any

log = logging.getLogger(__name__)

Work = Coroutine[Any, Any, None]


class Kind(enum.Enum):
    SERVICE = "runs until its owner closes"
    JOB = "ends when its work is done"


class Tasks:
    """The tasks one owner spawned, until they end or the owner closes them."""

    def __init__(
        self,
        on_failure: Callable[[BaseException], None] | None = None,
        close_budget_s: float = 30.0,
        tracebacks: bool = True,
    ) -> None:
        self.on_failure = on_failure
        self.close_budget_s = close_budget_s
        self._tracebacks = tracebacks  # False where a crash explains itself in its message
        self._tasks: dict[asyncio.Task[None], Kind] = {}  # the strong references
        self._closed = False

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, work: Work, name: str, kind: Kind = Kind.SERVICE) -> asyncio.Task[None]:
        """Run `work` as the task `name`; once the group is closed, it is cancelled before it
        runs, so nothing outlives its owner."""
        task = asyncio.get_running_loop().create_task(work, name=name)
        if self._closed:
            task.cancel()
            return task
        self._tasks[task] = kind
        task.add_done_callback(self._ended)
        return task

    def cancel(self, kind: Kind) -> None:
        """Cancel the tasks of `kind` (they end on their next turn)."""
        for task, task_kind in self._tasks.items():
            if task_kind is kind:
                task.cancel()

    async def wait(self, timeout_s: float) -> None:
        """Wait up to `timeout_s` for every task to end of itself."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=timeout_s)

    async def close(self) -> None:
        """Cancel every task and wait for them, `close_budget_s` at most: a task that does not
        end when cancelled (its thread is in a Kafka call) is logged and left."""
        self._closed = True
        for task in self._tasks:
            task.cancel()
        await self.wait(self.close_budget_s)
        if self._tasks:
            names = sorted(task.get_name() for task in self._tasks)
            log.error("tasks %s did not end within %.0f s; going on", names, self.close_budget_s)

    def _ended(self, task: asyncio.Task[None]) -> None:
        kind = self._tasks.pop(task)
        if task.cancelled():
            return
        raised = task.exception()
        if raised is None and kind is Kind.JOB:
            return
        error = raised or RuntimeError(f"{task.get_name()} stopped")
        traceback = raised if self._tracebacks else None
        log.error("background task %s ended: %s", task.get_name(), error, exc_info=traceback)
        if traceback is None and raised is not None:
            log.debug("background task %s ended", task.get_name(), exc_info=raised)
        if self.on_failure is not None:
            self.on_failure(error)
