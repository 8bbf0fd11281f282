"""One asyncio lock per key, created on demand and dropped when nobody holds or awaits it."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from types import TracebackType


class KeyedLocks:
    def __init__(self) -> None:
        self._locks: dict[Hashable, tuple[asyncio.Lock, int]] = {}

    def hold(self, key: Hashable) -> Held:
        """`async with locks.hold(key):` holds the key's lock (every append takes one: a plain
        context manager, not a generator-based one, keeps that cheap)."""
        return Held(self._locks, key)

    def __len__(self) -> int:
        return len(self._locks)


class Held:
    """One holding of a key's lock: counted as a user from before it waits until it lets go."""

    __slots__ = ("_key", "_lock", "_locks")

    def __init__(self, locks: dict[Hashable, tuple[asyncio.Lock, int]], key: Hashable) -> None:
        self._locks, self._key = locks, key

    async def __aenter__(self) -> None:
        lock, users = self._locks.get(self._key) or (asyncio.Lock(), 0)
        self._locks[self._key] = (lock, users + 1)
        self._lock = lock
        try:
            await lock.acquire()
        except BaseException:  # cancelled while waiting: no longer a user
            self._leave()
            raise

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._lock.release()
        self._leave()

    def _leave(self) -> None:
        lock, users = self._locks[self._key]
        if users == 1:
            del self._locks[self._key]
        else:
            self._locks[self._key] = (lock, users - 1)
