"""The start-up and monitoring worker: Kafka and the internal topics, the state once, S3."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from adapter.cluster.shared_folder import FolderGuard, refusal
from adapter.log.errors import Retriable
from adapter.log.writer import COMMIT_ATTEMPTS, TRANSACTION_TIMEOUT_MS
from adapter.objects.base import ObjectStore, ObjectStoreError
from adapter.readiness import Readiness
from topology.admin import TopologyAdmin
from topology.errors import AccessDenied, TopologyError
from topology.replication import (
    DURABLE_BROKERS,
    DURABLE_MIN_INSYNC_REPLICAS,
    DURABLE_REPLICATION_FACTOR,
    Replication,
    resolve,
)

log = logging.getLogger(__name__)

KAFKA = "kafka"
TOPICS = "internal_topics"
CATALOG = "catalog"
OBJECTS = "object_store"
OWNERSHIP = "ownership"  # set by the slot writers: joined the owners' group, slots initialised
TIER = "tier"  # set by the tier worker: always ok, its detail says the tier lag
CHECKS = [KAFKA, TOPICS, CATALOG, OWNERSHIP, OBJECTS, TIER]
# The checks that make a ready instance unready when they fail (with `serving`): the others
# only had to hold once (adapter/readiness.py says why).
GATES = frozenset({CATALOG})


@dataclass(frozen=True)
class Durability:
    """The settings the start-up durability checks judge (see `durability_findings`);
    replication as configured (0: auto) until `resolved` for a cluster."""

    replication_factor: int
    min_insync_replicas: int
    kafka_timeout_ms: int
    require_durable_topics: bool = False
    allow_unreplicated: bool = False

    def resolved(self, brokers: int) -> Durability:
        """With `auto` resolved for a cluster of `brokers`; ReplicationRefused when the
        configured replication must not be used there (`topology.replication.resolve`)."""
        wanted = Replication(
            self.replication_factor, self.min_insync_replicas, self.allow_unreplicated
        )
        rf, isr = resolve(brokers, wanted)
        return replace(self, replication_factor=rf, min_insync_replicas=isr)


@dataclass(frozen=True)
class Findings:
    """What the checks found: warnings to log, and whether start-up must stop."""

    warnings: list[str]
    refuse: bool


class WeakTopics(TopologyError):
    """Topics would be less durable than the cluster allows, and require_durable_topics is on."""


def weak_topics(brokers: int, durability: Durability) -> str | None:
    """Why our topics would be weaker than a cluster of this size allows; None if they are not."""
    rf, isr = durability.replication_factor, durability.min_insync_replicas
    if brokers < DURABLE_BROKERS or (
        rf >= DURABLE_REPLICATION_FACTOR and isr >= DURABLE_MIN_INSYNC_REPLICAS
    ):
        return None
    return (
        f"the cluster has {brokers} brokers but our topics get replication_factor={rf} and"
        f" min_insync_replicas={isr}: one broker lost can lose acknowledged appends; set"
        f" replication_factor={DURABLE_REPLICATION_FACTOR} and min_insync_replicas="
        f"{DURABLE_MIN_INSYNC_REPLICAS} (topics that exist already keep theirs)"
    )


def worst_transaction_ms(kafka_timeout_ms: int) -> int:
    """The longest a writer's transaction can stay open: its flush waits up to one kafka
    timeout, then each of its commit attempts up to one more."""
    return kafka_timeout_ms * (1 + COMMIT_ATTEMPTS)


def slow_transactions(kafka_timeout_ms: int) -> str | None:
    """Why a transaction could outlive transaction.timeout.ms; None if it cannot."""
    worst = worst_transaction_ms(kafka_timeout_ms)
    if worst < TRANSACTION_TIMEOUT_MS:
        return None
    most = (TRANSACTION_TIMEOUT_MS - 1) // (1 + COMMIT_ATTEMPTS)
    return (
        f"kafka_timeout_ms={kafka_timeout_ms} lets a transaction stay open {worst} ms (a flush"
        f" and {COMMIT_ATTEMPTS} commit attempts), not below the writer's transaction.timeout.ms"
        f" of {TRANSACTION_TIMEOUT_MS}: the broker may abort a transaction we still commit;"
        f" set kafka_timeout_ms to at most {most}"
    )


def durability_findings(brokers: int, durability: Durability) -> Findings:
    """Start-up's judgement: warn about weak topics (refuse them if required) and slow commits."""
    weak = weak_topics(brokers, durability)
    slow = slow_transactions(durability.kafka_timeout_ms)
    warnings = [finding for finding in (weak, slow) if finding is not None]
    return Findings(warnings, refuse=weak is not None and durability.require_durable_topics)


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
        durability: Durability,
        interval_s: float = 2.0,
        folder: FolderGuard | None = None,
    ) -> None:
        self.admin = admin
        self.objects = objects
        self.readiness = readiness
        self.load_state = load_state
        self.durability = durability
        self.interval_s = interval_s
        self.folder = folder
        self._durability_judged = False

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
                await self._judge_durability_once()
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
            if isinstance(error, AccessDenied):
                log.warning("kafka refused an operation: %s", error)
            else:
                log.warning("kafka not reachable: %s", error)
            self.readiness.set(KAFKA, False, str(error))

    async def _judge_durability_once(self) -> None:
        """Before any topic is created: resolve the replication our topics get (raise
        ReplicationRefused if it must not be used), log each finding, raise WeakTopics if
        required."""
        if self._durability_judged:
            return
        brokers = await self.admin.broker_count()
        durability = self.durability.resolved(brokers)
        self.admin.use_replication(durability.replication_factor, durability.min_insync_replicas)
        log.info(
            "topics get replication_factor=%d and min_insync_replicas=%d (%d brokers)",
            durability.replication_factor,
            durability.min_insync_replicas,
            brokers,
        )
        findings = durability_findings(brokers, durability)
        self._durability_judged = True
        for warning in findings.warnings:
            log.warning("weak durability: %s", warning)
        if findings.refuse:
            raise WeakTopics(f"{findings.warnings[0]}; require_durable_topics is true")

    async def _load_state_once(self) -> None:
        if self.readiness.is_ok(CATALOG) or not self.readiness.is_ok(TOPICS):
            return
        try:
            count = await self.load_state()
            self.readiness.set(CATALOG, True, f"replayed {count} records", replayed_records=count)
        except Retriable as error:
            log.warning("catalog not loaded yet: %s", error)
            self.readiness.set(CATALOG, False, str(error))

    async def _check_objects(self) -> None:
        try:
            await self.objects.check()
            strangers = await self._strangers()
        except ObjectStoreError as error:
            log.warning("object store not usable: %s", error)
            self.readiness.set(OBJECTS, False, str(error))
            return
        if strangers:
            if self.readiness.is_ok(OBJECTS):
                log.error("%s", refusal(strangers))
            self.readiness.set(OBJECTS, False, refusal(strangers), strangers=strangers)
        else:
            self.readiness.set(OBJECTS, True, "reachable")

    async def _strangers(self) -> list[str]:
        """Slot owners that do not share our `fs` folder (see shared_folder.py)."""
        if self.folder is None or not self.readiness.is_ok(CATALOG):
            return []
        return await self.folder.strangers()
