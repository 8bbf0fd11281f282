"""Live readers here of streams written by another instance, woken by the streams' own records.

The owner of a stream's write slot writes each append to the stream's partition and its
metadata only later (or, below format level 7, in the same transaction, which the meta topic's
followers may still be behind on). So the instance's live readers (long-polls, SSE sessions)
of such a stream wait on its partition: one consumer (`PartitionWatch`) follows exactly the
partitions that hold a stream somebody waits on here and whose slot is written elsewhere,
each from the lowest tail known here among those streams. A committed record of a waited-on
stream brings the stream to it (`DataTails.caught_up`, which wakes the stream's readers
through the hub). Nothing per reader asks Kafka; with nobody waiting, nothing is followed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable

from adapter.log.errors import LogUnavailable
from adapter.log.partition_watch import PartitionWatch, Place, Seen
from adapter.protocol.model import StreamMeta
from adapter.service.hub import LiveHub
from adapter.state.catalog import Catalog
from adapter.state.data_tails import DataTails

log = logging.getLogger(__name__)

POLL_S = 0.2  # a poll's wait: how soon a newly waited-on partition is followed
RETRY_S = 1.0  # after the broker failed a poll
PLAN_EVERY_S = 1.0  # the plan made again at least this often: waiters gone, slots moved
StreamKey = tuple[str, str]
Plan = dict[Place, dict[bytes, StreamKey]]  # followed partitions: their waited-on streams


class DataWakeups:
    def __init__(
        self,
        hub: LiveHub,
        catalog: Catalog,
        tails: DataTails,
        watch: PartitionWatch,
        place_of: Callable[[StreamMeta], Place | None],
    ) -> None:
        self.hub = hub
        self.catalog = catalog
        self.tails = tails
        self.watch = watch
        self.place_of = place_of  # where a stream written elsewhere lies; None: written here
        self._keys: set[StreamKey] = set()  # waited on (some may be no longer)
        self._wanted = asyncio.Event()
        hub.on_watched = self.watched

    def watched(self, key: Hashable) -> None:
        """The hub's: `key` has a first waiter or listener."""
        if isinstance(key, tuple) and len(key) == 2 and key[1]:
            self._keys.add((str(key[0]), str(key[1])))
            self._wanted.set()

    async def run(self) -> None:
        """Follow and wake, until cancelled."""
        loop = asyncio.get_running_loop()
        plan: Plan = {}
        starts: dict[Place, int] = {}
        planned_at = -PLAN_EVERY_S
        while True:
            if self._wanted.is_set() or loop.time() - planned_at >= PLAN_EVERY_S:
                self._wanted.clear()  # keys watched from here on are in the next plan
                plan, starts = self._plan()
                planned_at = loop.time()
            try:
                await self.watch.follow(starts)
                if not plan:
                    await self._wanted.wait()  # idle: nobody here waits on such a stream
                    continue
                seen = await self.watch.poll(POLL_S)
            except LogUnavailable as error:
                log.info("waking live readers from data partitions: %s", error)
                await asyncio.sleep(RETRY_S)
                continue
            await self._wake(plan, seen)

    async def close(self) -> None:
        await self.watch.close()

    def _plan(self) -> tuple[Plan, dict[Place, int]]:
        """The partitions to follow, their waited-on streams, and where each would start."""
        plan: Plan = {}
        starts: dict[Place, int] = {}
        for key in list(self._keys):
            if not self.hub.watching(key):
                self._keys.discard(key)
                continue
            meta = self.catalog.stream(*key)
            place = None if meta is None else self.place_of(meta)
            if meta is None or place is None:
                continue
            plan.setdefault(place, {})[meta.record_id.encode()] = key
            starts[place] = min(starts.get(place, meta.next_offset), meta.next_offset)
        return plan, starts

    async def _wake(self, plan: Plan, seen: list[Seen]) -> None:
        """Bring each waited-on stream with records among `seen` to the last of them."""
        ends: dict[StreamKey, tuple[str, int]] = {}
        for topic, partition, record_key, offset in seen:
            key = plan.get((topic, partition), {}).get(record_key)
            if key is not None:
                ends[key] = (topic, offset + 1)
        for key, (topic, end) in ends.items():
            meta = self.catalog.stream(*key)
            if meta is None or end <= meta.next_offset:
                continue
            try:
                if not await self.tails.caught_up(topic, meta, end):
                    self.hub.notify(key)  # made anew or deleted: its readers look again
            except LogUnavailable as error:
                log.info("%s/%s not brought to its records: %s", *key, error)
