"""What a running instance holds open: its parts, closed in the reverse of the order they
started, and its background tasks, each started by `spawn`.

A background task runs until the instance closes: one that ends before (it raised, or
returned) is logged and makes serving impossible (`fatal`: the process exits 1), as does
anything else passed to `fail` (a dead slot writer or ownership thread). Closing cancels and
awaits the tasks where they were registered among the parts, and closes every part even when
one of them fails to close (that failure is logged): a failed close must not leave the
instance's Kafka clients, threads or files open behind it. Each close has `close_budget_s`: one
that takes longer (a Kafka call that never answers, a task that does not end when cancelled)
is logged and left, and the next part closes, so a shutdown always ends.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

log = logging.getLogger(__name__)

Close = Callable[[], Awaitable[None] | None]


class Running:
    """The parts one instance started (closed in reverse) and its background tasks."""

    def __init__(self, close_budget_s: float = 30.0) -> None:
        self.close_budget_s = close_budget_s
        self._started: list[tuple[str, Close]] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._fatal: asyncio.Future[BaseException] | None = None

    @property
    def fatal(self) -> asyncio.Future[BaseException]:
        """Resolves with the first error that makes serving impossible."""
        if self._fatal is None:  # made on the event loop, not when the parts are built
            self._fatal = asyncio.get_running_loop().create_future()
        return self._fatal

    def fail(self, error: BaseException) -> None:
        """Serving is impossible from now on; only the first error is kept."""
        if not self.fatal.done():
            self.fatal.set_result(error)

    def started(self, name: str, close: Close) -> None:
        """The part `name` started; `close` (sync or async) closes it."""
        self._started.append((name, close))

    def spawn(self, work: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        """Run `work` in the background until the instance closes."""
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._ended)
        return task

    async def stop_tasks(self) -> None:
        """Cancel every background task and wait for it to end (their outcome is in `fatal`)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    async def close(self) -> None:
        """Close every part started, the last started first."""
        while self._started:
            name, close = self._started.pop()
            await _closed(name, close, self.close_budget_s)

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        error = task.exception() or RuntimeError(f"{task.get_name()} stopped")
        # One line: the ends that are expected (a refusal to serve) were explained already.
        log.error("background task %s ended: %s", task.get_name(), error)
        log.debug("background task %s ended", task.get_name(), exc_info=error)
        self.fail(error)


async def _closed(name: str, close: Close, budget_s: float) -> None:
    """Close one part within `budget_s`; its failure is logged, never raised: the others
    close anyway."""
    try:
        closing = close()
        if inspect.isawaitable(closing):
            await asyncio.wait_for(closing, budget_s)
    except TimeoutError:
        log.error("closing %s did not finish within %.0f s; going on", name, budget_s)
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("closing %s failed", name)
