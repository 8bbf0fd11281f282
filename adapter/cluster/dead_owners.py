"""An owner that is gone, or paused past a bound, gives up its slots at once, not after its
group session.

An instance whose process died (kill -9, out of memory, a crash) sends no LeaveGroup: as a
static member its slots stay assigned to it until `owner_session_timeout_ms` runs out on the
group coordinator, and every write to them is refused meanwhile; so do those of an instance
paused (SIGSTOP, a stop-the-world stall) whose heartbeats resume only later. A lower session
timeout alone is no cure: brokers refuse one below `group.min.session.timeout.ms` (6 s by
default), and a shorter one takes slots from every instance that is merely slow.

The faster signals come from a peer's forward to the owner, and each is confirmed before the
owner is removed from the owners' group (`topology/group_eviction.py`, after which the group
moves its slots to the live instances at once):

- **refused**: a forward failed (a connection refused, or a kept-alive one reset by the dying
  process). The peer connects to the owner's address for `refused_s`; only if every connection
  is **refused** is the owner taken for dead. A refused connection means nothing listens at the
  address any more (its process is gone); a paused, overloaded or partitioned process still
  accepts connections (the kernel completes them) or lets them time out.
- **unanswered**: a forward that reached the owner (its connection accepted) has had no answer
  for `SILENT_AFTER_S` (a write normally takes milliseconds), and again every `SILENT_AFTER_S`
  while it waits (an owner slow at first may be paused later). The peer then asks the owner's
  `/healthz`, which needs nothing but the owner's event loop (no broker), until one answers or
  `unanswered_s` has passed; only an owner whose address accepted every connection and that
  answered none of them for that long is taken for paused. An address that lets connections
  time out (a partition, a machine gone) is not: this peer alone may be cut off from it. A
  paused owner evicted is fenced when it resumes: its producers by the slot's new owner
  (Kafka's transactional fencing), its group membership by the eviction, so it writes nothing
  more and rejoins as a newcomer. `unanswered_s` = 0 leaves a paused owner to its session.

An address evicted is left alone for `QUIET_S`, so a refusal that lasts (an instance reachable
by Kafka whose advertised address refuses, which also steps aside by itself:
adapter/cluster/reach.py) is acted on once, not at every forward.

What this does not speed up: a whole machine gone (connections time out rather than being
refused or accepted) keeps its slots until its session ends; so does an owner, dead or paused,
that no forward is sent to.
See docs/operations.md, "Several instances".
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from enum import StrEnum

log = logging.getLogger(__name__)

CONFIRM_PAUSE_S = 0.25  # between two connections that confirm a refusal, at most
PROBE_PAUSE_S = 0.25  # between two liveness probes of an owner that did not answer
SILENT_AFTER_S = 0.5  # a forward unanswered this long has its owner's liveness checked
QUIET_S = 30.0  # after an eviction, how long the same address is not suspected again


class Signal(StrEnum):
    """What made a peer suspect an owner (a metric label)."""

    REFUSED = "refused"  # a forward failed and its address refuses connections
    UNANSWERED = "unanswered"  # a forward and the liveness probes had no answer


class Outcome(StrEnum):
    """How a check of a suspected owner ended (a metric label)."""

    EVICTED = "evicted"  # removed from the owners' group
    ALIVE = "alive"  # it answered (or accepted a connection): left to its session
    FAILED = "failed"  # taken for gone, but the removal failed: its session decides
    # Taken for gone, and already out of the group: no member at its address was left to
    # remove (a peer's check removed it first, or its session ended meanwhile).
    ALREADY = "already"


@dataclass(frozen=True, slots=True)
class Probes:
    """How a peer asks the owner at a URL whether it is there."""

    # A connection to it accepted (True), refused (False), or neither (None: timed out).
    accepts: Callable[[str], Awaitable[bool | None]]
    answers: Callable[[str, float], Awaitable[bool]]  # its liveness probe answered in time


@dataclass(frozen=True, slots=True)
class Bounds:
    """How long an owner must look gone before it is evicted (`owner_refused_ms`,
    `owner_unanswered_ms`; 0 for the latter: never for that signal)."""

    refused_s: float = 0.5
    unanswered_s: float = 0.0

    def confirmations(self) -> int:
        """Connections, `CONFIRM_PAUSE_S` apart at most, that must all be refused."""
        return max(1, math.ceil(self.refused_s / CONFIRM_PAUSE_S - 1e-9))


class DeadOwners:
    """Evicts the owner at an address once a check confirms it is gone or paused."""

    def __init__(
        self,
        probes: Probes,
        evict: Callable[[str], Awaitable[list[str]]],
        bounds: Bounds = Bounds(),
        siblings: Collection[str] = (),
        counted: Callable[[Signal, Outcome, int], None] = lambda _s, _o, _n: None,
    ) -> None:
        self.probes = probes
        self.evict = evict  # the owners' group's members at the URL removed; their ids
        self.bounds = bounds
        self.siblings = frozenset(siblings)  # restarted by our own parent: never evicted
        self.counted = counted  # each check's end, with the members removed
        self._checking: dict[str, asyncio.Task[None]] = {}
        self._quiet_until: dict[str, float] = {}
        self.evictions = 0
        self._closed = False

    def suspect(self, url: str) -> None:
        """A forward to `url` failed: check, and evict the owner there if it is gone."""
        self._start(url, Signal.REFUSED)

    def unanswered(self, url: str) -> None:
        """A forward to `url` has had no answer for `SILENT_AFTER_S`: check, and evict the owner
        there if it answers nothing for `unanswered_s`."""
        if self.bounds.unanswered_s > 0:
            self._start(url, Signal.UNANSWERED)

    def _start(self, url: str, signal: Signal) -> None:
        if self._closed or url in self.siblings or url in self._checking:
            return
        if time.monotonic() < self._quiet_until.get(url, 0.0):
            return
        task = asyncio.create_task(self._check(url, signal), name=f"dead-owner {url}")
        self._checking[url] = task
        task.add_done_callback(lambda _done: self._checking.pop(url, None))

    async def _check(self, url: str, signal: Signal) -> None:
        gone = self._refused if signal is Signal.REFUSED else self._silent
        try:
            if not await gone(url):
                self.counted(signal, Outcome.ALIVE, 0)
                return  # alive after all: its session decides
            await self._evict(url, signal)
        except asyncio.CancelledError:
            raise
        except Exception:  # a failed eviction leaves the session to end: never fatal
            log.warning("could not remove %s from the owners' group", url, exc_info=True)
            self.counted(signal, Outcome.FAILED, 0)

    async def _refused(self, url: str) -> bool:
        """Whether every connection to `url` is refused for `refused_s`."""
        count = self.bounds.confirmations()
        for _ in range(count):
            await asyncio.sleep(self.bounds.refused_s / count)
            if await self.probes.accepts(url) is not False:
                return False
        log.warning("nothing listens at %s any more: removing it from the owners' group", url)
        return True

    async def _silent(self, url: str) -> bool:
        """Whether the owner at `url` answers no liveness probe for `unanswered_s` while its
        address accepts every connection (one refused: it is gone, as good as silent). An
        address that does not accept one in time (a partition, a machine gone) is no paused
        process: its session decides, as a forward that never connected was never sent."""
        deadline = time.monotonic() + self.bounds.unanswered_s
        while (left := deadline - time.monotonic()) > 0:
            if await self.probes.answers(url, left):
                return False
            accepted = await self.probes.accepts(url)
            if accepted is False:
                break
            if accepted is None:
                return False
            await asyncio.sleep(min(PROBE_PAUSE_S, max(0.0, deadline - time.monotonic())))
        log.warning(
            "%s answered nothing for %.1fs: removing it from the owners' group",
            url,
            self.bounds.unanswered_s,
        )
        return True

    async def _evict(self, url: str, signal: Signal) -> None:
        self._quiet_until[url] = time.monotonic() + QUIET_S
        evicted = await self.evict(url)
        self.evictions += len(evicted)
        if not evicted:
            # Not a failure: several peers whose forwards went unanswered check the same
            # owner, and the first to be sure removes it; the owner is out either way.
            log.info("%s is no member of the owners' group any more: nothing to remove", url)
            self.counted(signal, Outcome.ALREADY, 0)
            return
        log.warning("removed %s (%s) from the owners' group", url, ", ".join(evicted))
        self.counted(signal, Outcome.EVICTED, len(evicted))

    async def close(self) -> None:
        """Check and evict nobody from now on (a stopping instance closes this first: its
        peers may be stopping with it, and those that stay see to a dead owner themselves);
        the checks under way end."""
        self._closed = True
        for task in list(self._checking.values()):
            task.cancel()
        await asyncio.gather(*self._checking.values(), return_exceptions=True)
