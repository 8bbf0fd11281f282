"""The start-up and monitoring worker: Kafka and the internal topics, the state once, S3."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from adapter.log.errors import LogUnavailable
from adapter.objects.base import ObjectStore, ObjectStoreError
from adapter.readiness import Readiness
from topology.admin import TopologyAdmin
from topology.errors import TopologyError

log = logging.getLogger(__name__)

KAFKA = "kafka"
TOPICS = "internal_topics"
CATALOG = "catalog"
OBJECTS = "object_store"
OWNERSHIP = "ownership"  # set by the slot writers: joined the owners' group, slots initialised
CHECKS = [KAFKA, TOPICS, CATALOG, OWNERSHIP, OBJECTS]


class Supervisor:
    """Flips readiness as dependencies come and go; a non-retriable fault ends the process.

    `load_state` replays the state topics into the catalog, starts following them and joins
    the owners' group (slot writers start as slots are assigned), returning how many records
    it replayed. It runs once, after the internal topics are verified; until it has
    completed, the `catalog` check is false and the adapter serves no streams.
    """

    def __init__(
        self,
        admin: TopologyAdmin,
        objects: ObjectStore,
        readiness: Readiness,
        load_state: Callable[[], Awaitable[int]],
        interval_s: float = 2.0,
    ) -> None:
        self.admin = admin
        self.objects = objects
        self.readiness = readiness
        self.load_state = load_state
        self.interval_s = interval_s

    async def run(self) -> None:
        """Return never; raise TopologyError when an operator must fix something first."""
        while True:
            await self._check_kafka_and_topics()
            await self._load_state_once()
            await self._check_objects()
            await asyncio.sleep(self.interval_s)

    async def _check_kafka_and_topics(self) -> None:
        try:
            if not self.readiness.is_ok(TOPICS):
                created = await self.admin.ensure_internal_topics()
                detail = f"verified (created {len(created)})"
                self.readiness.set(TOPICS, True, detail, created=sorted(created))
            else:
                await self.admin.topic_names()
            self.readiness.set(KAFKA, True, "metadata answered")
        except TopologyError as error:
            if not error.retriable:
                log.error("refusing to serve: %s", error)
                raise
            log.warning("kafka not reachable: %s", error)
            self.readiness.set(KAFKA, False, str(error))

    async def _load_state_once(self) -> None:
        if self.readiness.is_ok(CATALOG) or not self.readiness.is_ok(TOPICS):
            return
        try:
            count = await self.load_state()
            self.readiness.set(CATALOG, True, f"replayed {count} records", replayed_records=count)
        except LogUnavailable as error:
            log.warning("catalog not loaded yet: %s", error)
            self.readiness.set(CATALOG, False, str(error))

    async def _check_objects(self) -> None:
        try:
            await self.objects.check()
        except ObjectStoreError as error:
            log.warning("object store not usable: %s", error)
            self.readiness.set(OBJECTS, False, str(error))
        else:
            self.readiness.set(OBJECTS, True, "reachable")
