"""Where live readers wait for a stream to change, and who wakes them.

One future per watched stream, shared by all its waiters and replaced when it fires: waking
a thousand long-polls on one stream is one `set_result`. Entries exist only while somebody
waits, so memory follows the number of waiters, not the number of streams.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Hashable


class LiveHub:
    def __init__(self) -> None:
        self._changes: dict[Hashable, tuple[asyncio.Future[None], int]] = {}

    def notify(self, key: Hashable) -> None:
        """The stream changed (data, closure or deletion): wake everyone waiting on it."""
        entry = self._changes.pop(key, None)
        if entry is not None and not entry[0].done():
            entry[0].set_result(None)

    async def wait(self, key: Hashable, timeout_s: float) -> bool:
        """Wait until `key` is notified (True) or the timeout passes (False)."""
        if timeout_s <= 0:
            return False
        future, users = self._changes.get(key) or (asyncio.get_running_loop().create_future(), 0)
        self._changes[key] = (future, users + 1)
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            self._release(key, future)

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
