"""An owner whose process is gone gives up its slots at once, not after its group session.

An instance whose process died (kill -9, out of memory, a crash) sends no
LeaveGroup: as a static member its slots stay assigned to it until `owner_session_timeout_ms`
runs out on the group coordinator, and every write to them is refused meanwhile. A lower
session timeout alone is no cure: brokers refuse one below `group.min.session.timeout.ms`
(6 s by default), and a shorter one takes slots from instances that are merely slow.

The faster signal comes from a peer's forward to the owner that failed (a connection refused,
or a kept-alive one reset by the dying process): the peer then connects to the owner's address
`CONFIRMATIONS` times, `CONFIRM_PAUSE_S` apart, and only if each connection is **refused** is the
owner taken for dead. A refused connection means nothing listens at the address any more (its
process is gone); a paused, overloaded or partitioned process still accepts connections (the
kernel completes them) or lets them time out, which never counts as dead. Then the dead member is
removed from the owners' group (`topology/group_eviction.py`) and the group moves its slots to
the live instances at once. An address evicted is left alone for `QUIET_S`, so a refusal that
lasts (an instance reachable by Kafka whose advertised address refuses, which also steps aside
by itself: adapter/cluster/reach.py) is acted on once, not at every forward.

What this does not speed up: an owner paused or hung, or a whole machine gone (connections
accepted, or timing out, never refused), keeps its slots until its session ends; so does a
dead owner no forward is sent to (no write for its slots through another instance). See
docs/operations.md, "Several instances".
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Collection

log = logging.getLogger(__name__)

CONFIRMATIONS = 2  # connections refused in a row, after the forward's, that confirm a death
CONFIRM_PAUSE_S = 0.25
QUIET_S = 30.0  # after an eviction, how long the same address is not suspected again


class DeadOwners:
    """Evicts the owner at an address a forward failed to, once its death is confirmed."""

    def __init__(
        self,
        listening: Callable[[str], Awaitable[bool]],
        evict: Callable[[str], Awaitable[list[str]]],
        siblings: Collection[str] = (),
    ) -> None:
        self.listening = listening  # False only when a connection to the URL is refused
        self.evict = evict  # the owners' group's members at the URL removed; their ids
        self.siblings = frozenset(siblings)  # restarted by our own parent: never evicted
        self._checking: dict[str, asyncio.Task[None]] = {}
        self._quiet_until: dict[str, float] = {}
        self.evictions = 0

    def suspect(self, url: str) -> None:
        """A forward to `url` failed: check, and evict the owner there if it is gone."""
        if url in self.siblings or url in self._checking:
            return
        if time.monotonic() < self._quiet_until.get(url, 0.0):
            return
        task = asyncio.create_task(self._check(url), name=f"dead-owner {url}")
        self._checking[url] = task
        task.add_done_callback(lambda _done: self._checking.pop(url, None))

    async def _check(self, url: str) -> None:
        try:
            for _ in range(CONFIRMATIONS):
                await asyncio.sleep(CONFIRM_PAUSE_S)
                if await self.listening(url):
                    return  # alive after all: its session decides
            log.warning("nothing listens at %s any more: removing it from the owners' group", url)
            self._quiet_until[url] = time.monotonic() + QUIET_S
            evicted = await self.evict(url)
            self.evictions += len(evicted)
            log.warning("removed %s (%s) from the owners' group", url, ", ".join(evicted) or "gone")
        except asyncio.CancelledError:
            raise
        except Exception:  # a failed eviction leaves the session to end: never fatal
            log.warning("could not remove %s from the owners' group", url, exc_info=True)

    async def close(self) -> None:
        for task in list(self._checking.values()):
            task.cancel()
        await asyncio.gather(*self._checking.values(), return_exceptions=True)
