"""Turns at writing: how many of an instance's write slots run a transaction at once.

A transaction costs the server and the broker about the same whatever it holds, and an
instance owning every slot would otherwise run one per slot at once, each with its share of
the writers. Taking turns, the slots that wait gather the appends that arrive meanwhile, so
the same appends go in fewer, larger transactions: less CPU for each, on both sides.

A turn is never a wait on a stuck slot: a slot that has waited `patience_s` goes anyway (a
transaction held up by a partition leader moving must not stop the others). Waiting slots
are served first come, first served. Pure asyncio, no Kafka: tested on its own.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

# Long enough for a transaction under load to end (5 to 25 ms), short enough that a slot behind
# a stuck one is barely slowed.
PATIENCE_S = 0.1


class Turns:
    """At most `limit` transactions at once (0: no limit), each wait bounded by `patience_s`."""

    def __init__(self, limit: int, patience_s: float = PATIENCE_S) -> None:
        self.limit = limit
        self.patience_s = patience_s
        self.running = 0
        self._waiting: deque[asyncio.Future[bool]] = deque()

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Hold a turn for the body (a transaction)."""
        await self._take()
        try:
            yield
        finally:
            self._give_back()

    async def _take(self) -> None:
        if self.limit <= 0 or (self.running < self.limit and not self._waiting):
            self.running += 1
            return
        # Resolved True when a turn that ended is handed over (counted already), False when
        # the patience runs out first. Awaited directly: asyncio.wait_for in Python 3.11 can
        # swallow a cancellation that meets a result, and a slot's writer is cancelled here.
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        self._waiting.append(waiter)
        timer = loop.call_later(self.patience_s, self._impatient, waiter)
        try:
            handed = await waiter
        except asyncio.CancelledError:
            self._leave(waiter)
            raise
        finally:
            timer.cancel()
        if not handed:
            self.running += 1  # go anyway: the turns ahead are taking too long

    def _impatient(self, waiter: asyncio.Future[bool]) -> None:
        if not waiter.done():
            self._waiting.remove(waiter)
            waiter.set_result(False)

    def _leave(self, waiter: asyncio.Future[bool]) -> None:
        """A waiter cancelled: out of the queue, or the turn it was handed passed on."""
        if waiter.cancelled() or not waiter.done():
            if waiter in self._waiting:
                self._waiting.remove(waiter)
        elif waiter.result():
            self._give_back()

    def _give_back(self) -> None:
        """A turn ended: it passes to the first slot waiting, else it is free."""
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(True)
                return
        self.running -= 1
