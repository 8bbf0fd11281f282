"""What a running instance holds open: its parts, closed in the reverse of the order they
started, and its own background tasks, each started by `spawn`.

A part (`Part`) is anything with a `close` (sync or async); one that has something to start
(`Starting`: join a group, begin a refresh) is started by `start`, and one that holds clients,
threads or files from its construction is recorded by `opened`. Closing closes them last
first, each even when another fails to close (that failure is logged): a failed close must not
leave the instance's Kafka clients, threads or files open behind it. Each close has
`close_budget_s`: one that takes longer (a Kafka call that never answers, a task that does not
end when cancelled) is logged and left, and the next part closes, so a shutdown always ends.

The instance's own background tasks (`tasks`, a part among the others, where it was opened)
run until the instance closes: one that ends before (it raised, or returned) is logged and
makes serving impossible (`fatal`: the process exits 1), as does anything else passed to `fail`
(a dead slot writer or ownership thread).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable
from typing import Protocol

from adapter.tasks import Tasks, Work

log = logging.getLogger(__name__)


class Part(Protocol):
    """Something an instance closes at shutdown."""

    def close(self) -> Awaitable[None] | None: ...


class Starting(Part, Protocol):
    """A part with something to start once the instance runs."""

    async def start(self) -> None: ...


class Running:
    """The parts one instance started (closed in reverse) and its background tasks."""

    def __init__(self, close_budget_s: float = 30.0) -> None:
        self.close_budget_s = close_budget_s
        self._started: list[tuple[str, Part]] = []
        self._fatal: asyncio.Future[BaseException] | None = None
        # One line each: the ends that are expected (a refusal to serve) explain themselves.
        # Half the budget, so the tasks that did not end are named before it runs out.
        self.tasks = Tasks(self.fail, close_budget_s / 2, tracebacks=False)

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

    def opened(self, name: str, part: Part) -> None:
        """The part `name` is open (from its construction): it closes at shutdown."""
        self._started.append((name, part))

    async def start(self, name: str, part: Starting) -> None:
        """Start the part `name`; from then on it closes at shutdown."""
        await part.start()
        self._started.append((name, part))

    def spawn(self, work: Work, name: str) -> asyncio.Task[None]:
        """Run `work` in the background until the instance closes."""
        return self.tasks.spawn(work, name)

    async def close(self) -> None:
        """Close every part started, the last started first; how long each took is logged
        (the slowest first), so that a slow stop names the part it waited for."""
        took: list[tuple[float, str]] = []
        began = time.monotonic()
        while self._started:
            name, part = self._started.pop()
            closing = time.monotonic()
            await _closed(name, part, self.close_budget_s)
            took.append((time.monotonic() - closing, name))
        if took:
            slowest = ", ".join(f"{name} {s:.1f} s" for s, name in sorted(took, reverse=True)[:4])
            log.info(
                "closed %d parts in %.1f s (slowest: %s)",
                len(took),
                time.monotonic() - began,
                slowest,
            )


async def _closed(name: str, part: Part, budget_s: float) -> None:
    """Close one part within `budget_s`; its failure is logged, never raised: the others
    close anyway."""
    try:
        closing = part.close()
        if inspect.isawaitable(closing):
            await asyncio.wait_for(closing, budget_s)
    except TimeoutError:
        log.error("closing %s did not finish within %.0f s; going on", name, budget_s)
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("closing %s failed", name)
