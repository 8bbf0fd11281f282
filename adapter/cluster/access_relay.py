"""Reads served here of streams with a sliding TTL that another instance owns, told to it.

The owner decides expiry, and a renewal by a read is written nowhere (docs/architecture.md,
"Sliding TTLs"): a stream read only through other instances would expire on its owner while a
reader keeps it alive there. So each read served here of such a stream is told to its owner as an
access of its own, by the reader's `Reader` (a forwarded `GET ?offset=now` carrying the
reader's credential, which the owner checks again), at most once per quarter of the TTL per
stream; a read in between is told when that quarter ends, so the owner's last access is never
older than the last read here (save for a telling that fails: the next read tells it again).

Nothing is told when this instance owns every slot (it is the owner of whatever it reads), or
when the owner is a sibling worker of this process: a sibling's read asks the owner already,
before it is served (`Coordinator.before_read` in `adapter/cluster/coordinator.py`).

Memory is bounded by `owner_renewal_entries`: past that many streams, the one read here
longest ago is forgotten (a telling it was waiting for is sent at once instead), so its next
read is told at once, as a first one is. What is kept of a read is its `Reader`: the route and
the reader's credential, not the request. At most `MAX_TELLINGS` run at once: a read that would
start one more is not told, and its stream is forgotten, so its next read is told.

HTTP stays out of this layer: the edge hands each read its `Reader`, which knows how to ask an
owner as that reader did (its credential is the reader's, so it comes with the read).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Coroutine
from dataclasses import dataclass
from functools import partial
from typing import Any

from adapter.cluster.routing import Forward, Route, Router
from adapter.protocol.model import StreamMeta
from adapter.tasks import Kind, Tasks

# Asks the instance at a URL for the stream as the reader asked here: an access there.
Reader = Callable[[str], Coroutine[Any, Any, None]]
Tell = Callable[[], Coroutine[Any, Any, None]]
SHARE_OF_TTL = 4  # told at most this many times per TTL per stream
DEFAULT_ENTRIES = 10_000  # streams remembered (`owner_renewal_entries`)
# Tellings running at once: past it a read is not told now, and is forgotten so that the
# stream's next read is told (a burst of reads of many streams never opens a connection each).
MAX_TELLINGS = 64


@dataclass(slots=True)
class _Told:
    at: float  # monotonic time of the last telling
    every: float  # the quarter of the stream's TTL
    later: asyncio.TimerHandle | None = None  # a telling due when the quarter ends
    waiting: Tell | None = None  # what `later` sends


def owner_to_tell(
    meta: StreamMeta, accepting_all: bool, route: Route, siblings: Collection[str]
) -> str | None:
    """The URL of the instance a read of `meta` served here is told to, or None: only a
    sliding TTL is renewed by reads, an instance that takes every slot's writes owns whatever
    it reads, and a sibling worker was asked before the read was served."""
    if meta.ttl_seconds is None or accepting_all:
        return None
    if not isinstance(route, Forward) or route.url in siblings:
        return None
    return route.url


class AccessRelay:
    """The owners of streams read here, told of those reads (see the module's docstring)."""

    def __init__(
        self,
        router: Router,
        tasks: Tasks,
        siblings: Collection[str] = (),
        entries: int = DEFAULT_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
        max_tellings: int = MAX_TELLINGS,
    ) -> None:
        self.router = router
        self._max_tellings = max_tellings
        self.siblings = frozenset(siblings)  # sibling workers' advertised URLs
        self._entries = entries
        self._clock = clock
        self._told: OrderedDict[tuple[str, str], _Told] = OrderedDict()  # oldest read first
        self.tasks = tasks  # the tellings running (jobs: one that fails is told by the next read)

    def read(self, meta: StreamMeta, slot: int, reader: Reader) -> None:
        """A read of `meta` (in write slot `slot`) was served here by `reader`: its owner is
        told, when `owner_to_tell` names one."""
        if meta.ttl_seconds is None:
            return  # the usual case, decided before any routing
        accepting_all = self.router.writers.accepting_all()
        owner = owner_to_tell(meta, accepting_all, self.router.route(slot), self.siblings)
        if owner is not None:
            key = (meta.bucket_id, meta.stream_id)
            self.throttled(key, meta.ttl_seconds, partial(reader, owner))

    def throttled(self, key: tuple[str, str], ttl_s: float, tell: Tell) -> None:
        """Tell of a read of `key` (bucket, stream) now, or when the current quarter of `ttl_s`
        ends if it was told less than that ago."""
        now, every = self._clock(), ttl_s / SHARE_OF_TTL
        told = self._told.get(key)
        if told is None or now - told.at >= every:
            if told is not None and told.later is not None:
                told.later.cancel()  # told now instead
            if not self._start(key, tell):
                self._told.pop(key, None)  # untold: the next read tells it
                return
            self._told[key] = _Told(now, every)
        elif told.later is None:
            told.later = asyncio.get_running_loop().call_later(
                told.at + every - now, self._due, key
            )
            told.waiting = tell
        self._told.move_to_end(key)
        self._forget_oldest()

    def remembered(self) -> int:
        """How many streams' tellings are remembered (at most `entries`)."""
        return len(self._told)

    def pending(self) -> int:
        """Tellings running or waiting for their quarter to end."""
        return len(self.tasks) + sum(1 for t in self._told.values() if t.later is not None)

    async def close(self) -> None:
        for told in self._told.values():
            if told.later is not None:
                told.later.cancel()
        await self.tasks.close()

    def _due(self, key: tuple[str, str]) -> None:
        told = self._told[key]
        self._told[key] = _Told(self._clock(), told.every)
        if told.waiting is not None and not self._start(key, told.waiting):
            del self._told[key]  # untold: the next read tells it

    def _start(self, key: tuple[str, str], tell: Tell) -> bool:
        """Start telling; False when `MAX_TELLINGS` are running already."""
        if len(self.tasks) >= self._max_tellings:
            return False
        self.tasks.spawn(tell(), f"tell-{key[0]}/{key[1]}", Kind.JOB)
        return True

    def _forget_oldest(self) -> None:
        """Past `entries` streams, forget the one read longest ago; a read of it that waits
        for its quarter's end is told now, so no read goes untold."""
        while len(self._told) > self._entries:
            key, told = self._told.popitem(last=False)
            if told.later is not None and told.waiting is not None:
                told.later.cancel()
                self._start(key, told.waiting)
