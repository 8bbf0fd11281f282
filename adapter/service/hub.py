"""Where waiters on a stream (live reads, forwarded writes) wait for it to change.

One future per watched stream, shared by all its waiters and replaced when it fires: waking
a thousand long-polls on one stream is one `set_result`. Entries exist only while somebody
waits, so memory follows the number of waiters, not the number of streams. A stream may
also have one listener (its SSE broadcaster, `adapter.live.fanout`), called on every change.
Whoever makes the changes of streams written elsewhere known here (`adapter.live.data_wakeups`)
is told when a stream gains a first waiter or listener, and asks which still have one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Hashable


class LiveHub:
    def __init__(self) -> None:
        self._changes: dict[Hashable, tuple[asyncio.Future[None], int]] = {}
        self._listeners: dict[Hashable, Callable[[], None]] = {}
        self.stopping = False  # the server is stopping: nobody waits any more
        self.on_watched: Callable[[Hashable], None] | None = None  # a key's first waiter

    def watching(self, key: Hashable) -> bool:
        """Whether anyone waits on or listens to `key`."""
        return key in self._changes or key in self._listeners

    def stop(self) -> None:
        """The server is stopping: wake every waiter now, and let nobody wait from here on
        (a long-poll answers at once rather than hold the drain up to its timeout)."""
        self.stopping = True
        for key in list(self._changes):
            self.notify(key)

    def notify(self, key: Hashable) -> None:
        """The stream changed (data, closure or deletion): wake everyone waiting on it."""
        entry = self._changes.pop(key, None)
        if entry is not None and not entry[0].done():
            entry[0].set_result(None)
        listener = self._listeners.get(key)
        if listener is not None:
            listener()

    def listen(self, key: Hashable, listener: Callable[[], None] | None) -> None:
        """Call `listener` on every change of `key` (None: stop)."""
        if listener is None:
            self._listeners.pop(key, None)
            return
        self._told_watched(key)
        self._listeners[key] = listener

    async def wait(self, key: Hashable, timeout_s: float) -> bool:
        """Wait until `key` is notified (True) or the timeout passes (False); at once once the
        hub is stopping."""
        if timeout_s <= 0 or self.stopping:
            return False
        self._told_watched(key)
        future, users = self._changes.get(key) or (asyncio.get_running_loop().create_future(), 0)
        self._changes[key] = (future, users + 1)
        try:
            # asyncio.wait never cancels the shared future and needs no task or shield.
            done, _pending = await asyncio.wait((future,), timeout=timeout_s)
            return bool(done)
        finally:
            self._release(key, future)

    def _told_watched(self, key: Hashable) -> None:
        if self.on_watched is not None and not self.watching(key):
            self.on_watched(key)

    def _release(self, key: Hashable, future: asyncio.Future[None]) -> None:
        entry = self._changes.get(key)
        if entry is None or entry[0] is not future:
            return  # already fired and replaced
        if entry[1] <= 1:
            del self._changes[key]
            with contextlib.suppress(asyncio.InvalidStateError):
                future.cancel()
        else:
            self._changes[key] = (future, entry[1] - 1)

    @property
    def watched(self) -> int:
        return len(self._changes)

    @property
    def waiters(self) -> int:
        return sum(users for _, users in self._changes.values())
