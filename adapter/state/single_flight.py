"""`Fresh`: one call shared by every caller that needs a result taken after it asked.

A caller of `Fresh.get()` gets the result of a call that *started after* `get()` was called:
the answer is never older than the question (what "caught up to the end as of now" needs).
Callers that arrive while a call runs share the next call, started when the running one ends;
so however many callers wait, at most one call runs and one is queued behind it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Fresh(Generic[T]):
    def __init__(self, call: Callable[[], Awaitable[T]]) -> None:
        self._call = call
        self._running: asyncio.Future[T] | None = None
        self._queued: asyncio.Future[T] | None = None

    async def get(self) -> T:
        if self._queued is None:
            self._queued = asyncio.ensure_future(self._after(self._running))
        return await asyncio.shield(self._queued)

    async def _after(self, running: asyncio.Future[T] | None) -> T:
        if running is not None:
            await asyncio.wait([running])  # its outcome is its own callers'
        self._running, self._queued = self._queued, None  # later callers queue behind this one
        try:
            return await self._call()
        finally:
            if self._running is asyncio.current_task():
                self._running = None
