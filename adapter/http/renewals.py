"""Sliding-TTL renewals by reads served here of streams another instance owns, told to it.

The owner decides expiry, and a renewal by a read is written nowhere (docs/architecture.md,
"TTL"): a stream read only through other instances would expire on its owner while a reader
keeps it alive there. Each read here is told to the owner as an access of its own (the caller
sends a forwarded `GET ?offset=now`), at most once per quarter of the TTL per stream; a read
in between is told when that quarter ends, so the owner's last access is never older than
the last read here (save for a request that fails: the next read tells it again).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

Tell = Callable[[], Coroutine[Any, Any, None]]
SHARE_OF_TTL = 4  # told at most this many times per TTL per stream
REMEMBERED = 10_000  # past this many streams remembered, those whose quarter ended are dropped


@dataclass
class _Told:
    at: float  # monotonic time of the last telling
    every: float  # the quarter of the stream's TTL
    later: asyncio.TimerHandle | None = None  # a telling due when the quarter ends


class OwnerRenewals:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._told: dict[tuple[str, str], _Told] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def read(self, key: tuple[str, str], ttl_s: float, tell: Tell) -> None:
        """A read of `key` (bucket, stream) was served here: tell its owner now, or when the
        current quarter of `ttl_s` ends if it was told less than that ago."""
        now, every = self._clock(), ttl_s / SHARE_OF_TTL
        told = self._told.get(key)
        if told is None or now - told.at >= every:
            self._forget_ended(now)
            self._told[key] = _Told(now, every)
            self._start(tell)
        elif told.later is None:
            told.later = asyncio.get_running_loop().call_later(
                told.at + every - now, self._due, key, tell
            )

    def pending(self) -> int:
        """Tellings running or waiting for their quarter to end."""
        return len(self._tasks) + sum(1 for t in self._told.values() if t.later is not None)

    async def close(self) -> None:
        for told in self._told.values():
            if told.later is not None:
                told.later.cancel()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _due(self, key: tuple[str, str], tell: Tell) -> None:
        self._told[key] = _Told(self._clock(), self._told[key].every)
        self._start(tell)

    def _start(self, tell: Tell) -> None:
        task = asyncio.get_running_loop().create_task(tell())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _forget_ended(self, now: float) -> None:
        """Past `REMEMBERED` streams, drop those whose quarter ended with nothing waiting: the
        next read of one is told at once, as if it were still remembered."""
        if len(self._told) < REMEMBERED:
            return
        ended = [k for k, t in self._told.items() if t.later is None and now - t.at >= t.every]
        for key in ended:
            del self._told[key]
