"""The collector of snapshot blobs nothing points to: superseded ones, those of deleted
streams, and those of publishes that never committed.

The invariant: a blob is deleted only after this collector has seen it unreferenced for a
whole grace period, with its catalog caught up on the state topics. A publish commits its
pointer within half the grace period of its upload or not at all (the stream machine's
`PublishSnapshot` refuses it past `commit_by_ms`), and its upload came before the collector
first saw the blob, so a committed pointer is always in the catalog before its blob could be
judged an orphan.
The uploader's window is its own instance's setting, so it is written into the object's key
(`windowed`): a collector waits at least twice the window a key names, whatever its own grace
period, unless it has seen the object referenced (so committed) before. An instance set with
a shorter `snapshot_gc_grace_ms` than another's never takes the other's upload, not yet
committed, for an orphan.
A reader of a superseded snapshot has the grace period to finish. Deleting is idempotent, so
every instance may run a collector; forgetting what it saw (a restart) only delays deletion.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from adapter.objects.base import ObjectStore
from adapter.protocol.snapshots import OBJECT_PREFIX
from adapter.service.background import RIDDEN_OUT
from adapter.state.catalog import Catalog

log = logging.getLogger(__name__)

# `~w<ms>` ends the key's last segment, or the one before it (a tier chunk's attempt).
_WINDOW = re.compile(r"~w(\d{1,12})(?:/[^/]*)?$")


def windowed(unique: str, within_ms: int) -> str:
    """A key's unique part naming the window its uploader commits within (or never)."""
    return f"{unique}~w{within_ms}"


def window_of(key: str) -> int:
    """The commit window a key names (0 for a key of a release that named none)."""
    found = _WINDOW.search(key)
    return int(found.group(1)) if found else 0


def due(
    keys: Iterable[str],
    kept: set[str],
    seen: dict[str, int],
    now_ms: int,
    grace_ms: int,
    committed: AbstractSet[str] = frozenset(),
) -> tuple[list[str], dict[str, int]]:
    """(blobs to delete, when each other unreferenced blob was first seen so), from the blobs
    in the store, those visible snapshots point to, and what was seen before. A blob goes
    once seen so for the grace period, or twice its key's commit window if that is longer and
    it is not known `committed` (seen referenced before: no upload of it is still under way)."""
    doomed: list[str] = []
    still: dict[str, int] = {}
    for key in keys:
        if key in kept:
            continue
        first = seen.get(key, now_ms)
        wait = grace_ms if key in committed else max(grace_ms, 2 * window_of(key))
        if now_ms - first >= wait:
            doomed.append(key)
        else:
            still[key] = first
    return doomed, still


async def collect_forever(
    collect_once: Callable[[], Awaitable[object]], interval_s: float, what: str
) -> None:
    """Collect every interval until cancelled; a failed pass is logged and tried again."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            await collect_once()
        except RIDDEN_OUT as error:
            log.warning("%s collection failed, trying again later: %s", what, error)


@dataclass(frozen=True)
class Listing:
    """The objects under a prefix, listed by `now_ms`, before the catalog caught up."""

    now_ms: int
    keys: list[str]


class OrphanSweep:
    """The bookkeeping both collectors share: objects under `prefix` that nothing keeps, each
    deleted once seen so for a whole grace period. `begin` lists the store *then* catches the
    catalog up (so anything committed before the listing is in the catalog when `finish`
    judges it); `finish` deletes what is due and remembers when the others were first seen."""

    def __init__(
        self,
        store: ObjectStore,
        prefix: str,
        caught_up: Callable[[], Awaitable[None]],
        clock: Callable[[], int],
        grace_ms: int,
    ) -> None:
        self.store = store
        self.prefix = prefix
        self.caught_up = caught_up
        self.clock = clock
        self.grace_ms = grace_ms
        self._seen: dict[str, int] = {}
        self._committed: set[str] = set()  # listed objects seen referenced in some pass

    async def begin(self) -> Listing:
        keys = await self.store.keys(self.prefix)
        # Read after the listing returned, so an object is first seen no earlier than it was
        # stored, however long the listing took (an upload's deadline counts from before it).
        now = self.clock()
        await self.caught_up()
        return Listing(now, keys)

    async def finish(self, listing: Listing, kept: set[str]) -> list[str]:
        self._committed = {k for k in listing.keys if k in kept or k in self._committed}
        now, grace = listing.now_ms, self.grace_ms
        doomed, self._seen = due(listing.keys, kept, self._seen, now, grace, self._committed)
        for key in doomed:
            await self.store.delete(key)
        return doomed


class SnapshotCollector:
    def __init__(
        self,
        store: ObjectStore,
        catalog: Catalog,
        caught_up: Callable[[], Awaitable[None]],
        clock: Callable[[], int],
        grace_ms: int,
        interval_s: float,
    ) -> None:
        self.catalog = catalog
        self.interval_s = interval_s
        self.sweep = OrphanSweep(store, OBJECT_PREFIX, caught_up, clock, grace_ms)

    async def run(self) -> None:
        await collect_forever(self.collect_once, self.interval_s, "snapshot")

    async def collect_once(self) -> list[str]:
        """One pass: list the blobs, catch up on the state topics, delete what is due."""
        listing = await self.sweep.begin()
        doomed = await self.sweep.finish(listing, self.catalog.visible_snapshot_keys())
        if doomed:
            log.info("collected %d snapshot blobs", len(doomed))
        return doomed
