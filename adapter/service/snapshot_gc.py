"""The collector of snapshot blobs nothing points to: superseded ones, those of deleted
streams, and those of publishes that never committed.

The invariant: a blob is deleted only after this collector has seen it unreferenced for a
whole grace period, with its catalog caught up on the state topics. A publish commits its
pointer within half the grace period of its upload or not at all (`stream_machine.publish`
refuses it past `commit_by_ms`), and its upload came before the collector first saw the blob,
so a committed pointer is always in the catalog before its blob could be judged an orphan.
A reader of a superseded snapshot has the grace period to finish. Deleting is idempotent, so
every instance may run a collector; forgetting what it saw (a restart) only delays deletion.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from adapter.objects.base import ObjectStore
from adapter.protocol.snapshots import OBJECT_PREFIX
from adapter.service.background import RIDDEN_OUT
from adapter.state.catalog import Catalog

log = logging.getLogger(__name__)


def due(
    keys: Iterable[str], kept: set[str], seen: dict[str, int], now_ms: int, grace_ms: int
) -> tuple[list[str], dict[str, int]]:
    """(blobs to delete, when each other unreferenced blob was first seen so), from the blobs
    in the store, those visible snapshots point to, and what was seen before."""
    doomed: list[str] = []
    still: dict[str, int] = {}
    for key in keys:
        if key in kept:
            continue
        first = seen.get(key, now_ms)
        if now_ms - first >= grace_ms:
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

    async def begin(self) -> Listing:
        keys = await self.store.keys(self.prefix)
        # Read after the listing returned, so an object is first seen no earlier than it was
        # stored, however long the listing took (an upload's deadline counts from before it).
        now = self.clock()
        await self.caught_up()
        return Listing(now, keys)

    async def finish(self, listing: Listing, kept: set[str]) -> list[str]:
        doomed, self._seen = due(listing.keys, kept, self._seen, listing.now_ms, self.grace_ms)
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
