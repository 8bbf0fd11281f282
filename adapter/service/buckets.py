"""Buckets: one Kafka topic each, created explicitly (or on demand on the /v1/stream surface)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from itertools import islice
from typing import TYPE_CHECKING

from adapter.cluster.catch_up import MetaCatchUp
from adapter.cluster.slot_writers import SlotWriters
from adapter.log.errors import LogUnavailable
from adapter.log.writer import StateEntry
from adapter.protocol.bucket_config import BucketConfig, check_if_match, reconfigured
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.model import BucketMeta, StreamMeta
from adapter.service.locks import KeyedLocks
from adapter.service.state_entries import stream_tombstones
from adapter.state.catalog import Catalog
from adapter.state.records import encode as encode_meta
from adapter.tracing import transaction_span
from topology.admin import TopologyAdmin
from topology.errors import TopicMissing, TopologyError, TopologyMismatch
from topology.internal_records import bucket_key
from topology.naming import StateTopics
from topology.slots import SlotMap
from topology.specs import TopicLayout, TopicSpec, bucket_topic_spec

if TYPE_CHECKING:
    from adapter.tracing.otel import Tracing

log = logging.getLogger(__name__)

TOPIC_RETRY_S = 0.5
TOPIC_GOING_AWAY = ("marked for deletion", "unknown topic or partition")
# A bucket operation (waiting for the bucket's lock included) answers within this many
# Kafka timeouts, else 503: its topic steps and one transaction fit with room to spare.
DEADLINE_TIMEOUTS = 3


@dataclass(frozen=True)
class StreamPage:
    bucket_id: str
    prefix: str
    streams: list[StreamMeta]
    next_cursor: str | None


class BucketService:
    def __init__(
        self,
        catalog: Catalog,
        writers: SlotWriters,
        admin: TopologyAdmin,
        clock: Callable[[], int],
        catch_up: MetaCatchUp | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        self.catalog = catalog
        self.tracing = tracing  # None: off
        self.writers = writers
        # Follows the meta topic to now unless every slot is written here.
        self.catch_up = catch_up or MetaCatchUp(writers, None)
        self.slots = SlotMap(admin.layout.prefix, admin.layout.write_slots)
        self.admin = admin
        self.topics = StateTopics.of(admin.layout.prefix)
        self.clock = clock
        self.deadline_s = DEADLINE_TIMEOUTS * admin.timeout_s
        self.locks = KeyedLocks()  # per bucket id; mounts (`service/mounts.py`) share them
        self._creating: Counter[str] = Counter()  # stream creations in flight, per bucket
        self._deleting: set[str] = set()

    async def commit_state(self, slot: int, entries: list[StateEntry]) -> None:
        """Commit metadata records (a bucket's, a mount's) in one transaction of the slot, in
        the span of that transaction when a traced request writes them."""
        async with transaction_span(self.tracing, self.topics.meta):
            await self.writers.submit(slot, [], lambda _offsets: entries)

    @contextlib.asynccontextmanager
    async def creating_stream(self, bucket_id: str) -> AsyncIterator[None]:
        """Hold off a bucket delete while a stream is being created in it (and vice versa)."""
        self._refuse_if_deleting(bucket_id)
        self.get(bucket_id)  # deleted since `require` looked: no stream may be created in it
        self._creating[bucket_id] += 1
        try:
            yield
        finally:
            self._creating[bucket_id] -= 1
            if not self._creating[bucket_id]:
                del self._creating[bucket_id]

    @property
    def layout(self) -> TopicLayout:
        """The admin's: its replication is resolved from the broker count at start."""
        return self.admin.layout

    def topic(self, bucket_id: str) -> str:
        return self.get(bucket_id).topic

    def get(self, bucket_id: str) -> BucketMeta:
        meta = self.catalog.bucket(bucket_id)
        if meta is None:
            raise ProtocolError(ErrorCode.BUCKET_NOT_FOUND, f"bucket {bucket_id!r} not found")
        return meta

    def _refuse_if_deleting(self, bucket_id: str) -> None:
        if bucket_id in self._deleting:
            raise ProtocolError(
                ErrorCode.BUCKET_NOT_FOUND, f"bucket {bucket_id!r} is being deleted"
            )

    @contextlib.asynccontextmanager
    async def bounded(self, doing: str) -> AsyncIterator[None]:
        """Answer 503 once `deadline_s` has passed, whatever the step that is waiting."""
        try:
            async with asyncio.timeout(self.deadline_s):
                yield
        except TimeoutError as error:
            raise ProtocolError(
                ErrorCode.UNAVAILABLE, f"{doing} did not finish within {self.deadline_s:g}s; retry"
            ) from error

    async def require(self, bucket_id: str, create: bool, slot: int) -> BucketMeta:
        """The bucket, with its topic; created first when `create` (the /v1/stream surface)
        and missing.

        An on-demand creation is written through `slot`, the slot of the stream being created
        (its owner decides; creating the topic twice is harmless). A registered bucket whose
        topic is gone gets it back (`_repair`; with externally managed topics, 409
        `topic_missing` until the platform team re-creates it): records sent to a missing
        topic would hold the slot's whole transaction until the flush timed out.
        """
        async with self.bounded(f"preparing bucket {bucket_id!r}"):
            self._refuse_if_deleting(bucket_id)
            if create and self.catalog.bucket(bucket_id) is None:
                async with self.locks.hold(bucket_id):
                    if self.catalog.bucket(bucket_id) is None:
                        await self._create(bucket_id, slot)
            if not await self.admin.topic_exists(self.get(bucket_id).topic):
                await self._repair(bucket_id)
            return self.get(bucket_id)

    async def _repair(self, bucket_id: str) -> None:
        """Re-create, empty, the topic of a bucket registered without one.

        Deletion drops the topic before the bucket's records, so a deletion that failed in
        between leaves this state; its request was answered 5xx, which means not done, so the
        bucket stays and gets its topic back (a retried delete finishes the job instead).
        """
        async with self.locks.hold(bucket_id):
            meta = self.get(bucket_id)  # a deletion finished while we waited: 404
            if await self.admin.topic_exists(meta.topic):
                return
            log.warning("bucket %r has no topic %s", bucket_id, meta.topic)
            spec = bucket_topic_spec(self.layout, bucket_id)
            await self._ensure_topic(replace(spec, name=meta.topic, partitions=meta.partitions))

    def partitions_of(self, bucket_id: str) -> int:
        """The bucket's partitions, or those it will have when created on demand."""
        meta = self.catalog.bucket(bucket_id)
        return meta.partitions if meta else self.layout.partitions

    async def create(self, bucket_id: str, config: BucketConfig | None = None) -> BucketMeta:
        async with self.bounded(f"creating bucket {bucket_id!r}"), self.locks.hold(bucket_id):
            if self.catalog.bucket(bucket_id) is not None or self.catalog.mount(bucket_id):
                raise ProtocolError(ErrorCode.BUCKET_EXISTS, f"bucket {bucket_id!r} exists")
            return await self._create(bucket_id, self.slots.of_bucket(bucket_id), config)

    async def configure(
        self, bucket_id: str, config: BucketConfig, if_match: str | None
    ) -> BucketMeta:
        """Replace the bucket's configuration, when `if_match` (if any) names its current ETag.

        Decided and written under the bucket's lock by the owner of its slot (every instance
        forwards it there), so of two writers sending the same ETag exactly one finds it."""
        async with self.bounded(f"configuring bucket {bucket_id!r}"), self.locks.hold(bucket_id):
            if self.catalog.mount(bucket_id) is not None:
                raise ProtocolError(
                    ErrorCode.MOUNT_NOT_CONFIGURABLE,
                    f"{bucket_id!r} mounts a topic: its retention is the topic's own",
                )
            current = self.get(bucket_id)
            check_if_match(current, if_match)
            return await self._put(reconfigured(current, config), self.slots.of_bucket(bucket_id))

    async def _put(self, meta: BucketMeta, slot: int) -> BucketMeta:
        entry = (self.topics.meta, bucket_key(meta.bucket_id), encode_meta(meta))
        await self.commit_state(slot, [entry])
        self.catalog.put_bucket(meta)
        return meta

    async def delete(self, bucket_id: str) -> None:
        async with self.bounded(f"deleting bucket {bucket_id!r}"), self.locks.hold(bucket_id):
            # A stream another instance created in it a moment ago (acknowledged before this
            # delete began) may not be followed here yet: emptiness is judged on every
            # creation written so far, or the delete would take it with the topic.
            if not await self.catch_up.unless_local(None, f"deleting bucket {bucket_id!r}"):
                raise LogUnavailable(
                    f"cannot tell whether a stream was just created in bucket {bucket_id!r}"
                )
            meta = self.get(bucket_id)
            if self.live_count(bucket_id) or self._creating[bucket_id]:
                raise ProtocolError(ErrorCode.BUCKET_NOT_EMPTY, f"bucket {bucket_id!r} has streams")
            self._refuse_if_housing(bucket_id)
            self._deleting.add(bucket_id)  # no await since the check: no creation slipped in
            try:
                await self._delete(bucket_id, meta)
            finally:
                self._deleting.discard(bucket_id)

    def _refuse_if_housing(self, bucket_id: str) -> None:
        """409 while forks of other buckets live in the bucket's topic (a fork lives in its
        source's partition): deleting the topic would take their records with it."""
        housed = self.catalog.housed_in(bucket_id)
        if housed:
            names = ", ".join(f"{m.bucket_id}/{m.stream_id}" for m in housed[:3])
            raise ProtocolError(
                ErrorCode.BUCKET_NOT_EMPTY,
                f"bucket {bucket_id!r} holds the records of forks of other buckets ({names}"
                f"{', ...' if len(housed) > 3 else ''}): delete them first",
            )

    async def _delete(self, bucket_id: str, meta: BucketMeta) -> None:
        """Drop the topic, wait until it is gone, then forget the bucket and its expired streams.

        With externally managed topics the topic is left to the platform team, records
        included: only the bucket and its streams are forgotten. A bucket created again under
        that name adopts the topic; its streams start at their creation offsets, so the old
        records are never served (they only take space until the team deletes the topic).

        In this order no failure leaves a topic that no bucket names (an orphan, which a later
        bucket of that name would adopt, old records included): a failure after the topic
        went leaves the bucket registered without it, which a retried delete finishes (a
        topic already gone counts as deleted) and a stream creation repairs (`_repair`).
        Waiting until the metadata no longer lists the topic keeps a re-creation of the bucket
        from verifying and adopting the topic on its way out.
        """
        if self.admin.policy.manages_topics:
            await self.admin.delete_topics([meta.topic])
            await self._until_gone(meta.topic)
        else:
            log.info("bucket %r deleted; its topic %s is left to its owners", bucket_id, meta.topic)
        expired = list(self.catalog.stream_ids(bucket_id, "", None))
        entries: list[StateEntry] = [(self.topics.meta, bucket_key(bucket_id), None)]
        for stream_id in expired:
            entries += stream_tombstones(self.catalog, self.topics, bucket_id, stream_id)
        await self.commit_state(self.slots.of_bucket(bucket_id), entries)
        for stream_id in expired:
            self.catalog.drop_stream(bucket_id, stream_id)
        self.catalog.drop_bucket(bucket_id)

    async def _until_gone(self, topic: str) -> None:
        while True:  # bounded by the caller's deadline (`bounded`)
            if not await self.admin.topic_exists(topic):
                return
            await asyncio.sleep(TOPIC_RETRY_S)

    def live_count(self, bucket_id: str) -> int:
        now = self.clock()
        ids = self.catalog.stream_ids(bucket_id, "", None)
        return sum(1 for meta in self._metas(bucket_id, ids) if _listed(meta, now))

    def page(self, bucket_id: str, prefix: str, after: str | None, limit: int) -> StreamPage:
        self.get(bucket_id)
        now = self.clock()
        ids = self.catalog.stream_ids(bucket_id, prefix, after)
        live = (m for m in self._metas(bucket_id, ids) if _listed(m, now))
        found = list(islice(live, limit + 1))
        more = len(found) > limit
        streams = found[:limit]
        cursor = streams[-1].stream_id if more and streams else None
        return StreamPage(bucket_id, prefix, streams, cursor)

    def _metas(self, bucket_id: str, ids: Iterable[str]) -> Iterator[StreamMeta]:
        for stream_id in ids:
            meta = self.catalog.stream(bucket_id, stream_id)
            if meta is not None:
                yield meta

    async def _create(
        self, bucket_id: str, slot: int, config: BucketConfig | None = None
    ) -> BucketMeta:
        """Create (or, if managed externally, verify) the topic, then register the bucket with
        the topic's partitions: a platform team's topic may have another count than ours."""
        spec = bucket_topic_spec(self.layout, bucket_id)
        await self._ensure_topic(spec)
        partitions = spec.partitions
        if not self.admin.policy.manages_topics:
            partitions = await self.admin.partition_count(spec.name)
        max_age_ms = None if config is None else config.max_age_ms
        meta = BucketMeta(bucket_id, spec.name, partitions, self.clock(), max_age_ms)
        return await self._put(meta, slot)

    async def _ensure_topic(self, spec: TopicSpec) -> None:
        """Create the topic; a topic of the same name still being deleted is waited out.

        A topic of that name configured otherwise (say, compacted) is not ours to write to:
        the bucket cannot be created until an operator renames or removes it. With externally
        managed topics a missing one is 409 `topic_missing`, its message the command that
        creates it.
        """
        while True:  # bounded by the caller's deadline (`bounded`)
            try:
                await self.admin.ensure([spec])
                return
            except TopologyMismatch as error:
                raise ProtocolError(ErrorCode.TOPIC_CONFLICT, str(error)) from error
            except TopicMissing as error:
                raise ProtocolError(ErrorCode.TOPIC_MISSING, str(error)) from error
            except TopologyError as error:
                # A topic being deleted is listed a while after it stops being describable.
                if not any(sign in str(error).lower() for sign in TOPIC_GOING_AWAY):
                    raise
                await asyncio.sleep(TOPIC_RETRY_S)


def _listed(meta: StreamMeta, now_ms: int) -> bool:
    """A stream clients can see: not expired, and not soft-deleted (kept for its forks)."""
    return not meta.soft_deleted and not meta.expired(now_ms)
