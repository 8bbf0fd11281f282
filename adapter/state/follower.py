"""The instance's one consumer of the state topics: it rebuilds the catalog, then follows them.

At start it replays the compacted meta, producers, owners, snapshots and tier topics
(read_committed) to their ends into the catalog; then it keeps reading all five. Every commit
rewrites the meta record of each stream it touched, so this small topic says exactly when a
stream got new data or was closed, without reading the data topics. Every followed record is
applied in log order, like the replay, except the echo of one this instance wrote: its commit
updated the catalog already, and the writer said where that record landed before committing it,
so the echo is known by its offset (`adapter/state/own_records.py`); the echo of a stream's
meta record still tells the catalog that the stream's state up to it is recorded
(`adapter/state/unrecorded.py`). A record written by anyone else is applied, whoever owns the
stream's slot now: a resumed zombie sees the new owner's creations, deletions and producer
states. Owner records are applied as they come.

**Resuming.** The meta, producers and snapshots topics are what the catalog's SQLite file
holds (`adapter/state/store.py`); `checkpoint` saves it with the positions applied so far.
At start the replay resumes from those positions instead of offset 0 when the file's
checkpoint can still be trusted (`_resume_points`): the same cluster and the same topics (topic
ids: a topic deleted and re-created has a new one), each position within the partition's
[log start, end], and the checkpoint younger than half of the topics' `delete.retention.ms`
(compaction drops a tombstone only once it is older than that, so every deletion after the
checkpoint is still in the log as long as the follower was not lagging by as much when it
saved). Anything else, or any doubt, rebuilds from offset 0. Replaying records the file already
reflects is harmless: each key's last record wins, and a stream's state never goes back. The
owners and tier topics are small and held in memory only: always replayed whole.

`caught_up` lets a new slot owner wait until every change committed to the meta and producers
topics before it fenced the previous owner is in the catalog: positions count past
transaction markers (the end-of-partition event carries the fetch position), so they reach
the end offsets.

`seen_written` is what an instance that is not the stream's owner waits for before it routes a
write naming a stream it does not know, or creates a name it does not know: every stream record
*written* so far followed (or its transaction ended). The stable end `caught_up` asks for is
not enough there: Kafka acknowledges a commit once the coordinator has logged it, and writes
the markers that make its records readable a moment later, so a stream another instance was
answered 201 for can still sit above the meta topic's stable end (a fork appended to through
another instance at once got 404, 1 run in many). A new slot owner does not need it: its
init waits for the previous owner's transactions to be completed, markers included.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import ConfigResource, ResourceType

from adapter.log.errors import LogUnavailable
from adapter.log.reader import bounded_prefetch, poll_batch
from adapter.log.writer import StateWritten
from adapter.state.catalog import Catalog
from adapter.state.single_flight import Fresh
from adapter.state.view_age import ViewAge
from topology.client_stalls import STALLED_S, Stall
from topology.kafka_client import KafkaAccess, refusal_of
from topology.naming import StateTopics

log = logging.getLogger(__name__)

POLL_S = 0.2
WRITTEN_WAIT_S = 2.0  # how long `seen_written` waits for the transactions open when asked
MEASURE_EVERY_S = 0.5  # how often the view's currency is measured (at most)
# librdkafka prefetches ahead of what is polled until its queue holds 100,000 messages of a
# partition or 64 MiB in all (`queued.min.messages`, `queued.max.messages.kbytes`): native
# memory, which glibc keeps once freed. State records are small and applying them, not
# fetching them, is what limits a replay or a burst of creates, so 10,000 messages or 4 MiB
# keep the follower as busy, provided a full queue is looked at again soon (librdkafka waits
# 1 s: the rebuild took 40 % longer): a rebuild of 100,000 streams left RSS at 95-100 MiB
# instead of 123 MiB, ready as soon (bench/results/recorded/, "RSS growth").
QUEUE_MESSAGES = 10_000
QUEUE_KBYTES = 4096
DEFAULT_DELETE_RETENTION_MS = 24 * 3600 * 1000  # Kafka's default


class MetaFollower:
    def __init__(
        self,
        kafka: KafkaAccess,
        topics: StateTopics,
        catalog: Catalog,
        timeout_s: float,
        on_change: Callable[[str], None],
        on_owner: Callable[[], None] = lambda: None,
    ) -> None:
        self.topics = topics
        self.catalog = catalog
        self.timeout_s = timeout_s
        self.on_change = on_change
        self.on_owner = on_owner  # told each owners record applied
        self._positions: dict[str, int] = {}
        self._progress = asyncio.Event()
        self.kafka = kafka
        owned: dict[str, Any] = {
            "group.id": kafka.group("follower", unique=True),  # never joined
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 100,
            "queued.min.messages": QUEUE_MESSAGES,
            **bounded_prefetch(QUEUE_KBYTES),  # a full queue looked at again after 10 ms
        }
        self._config = kafka.config(owned, "librdkafka.follower")
        self._consumer: Consumer | None = None
        self._thread = concurrent.futures.ThreadPoolExecutor(1, "meta-follower")
        # The ends are asked on a connection and thread of their own, not queued behind the
        # follower's fetch (up to 200 ms): a caught-up follower answers in a few round trips.
        # Many waiters (writes naming a stream not known here yet) share one query.
        self._probes: dict[str, Consumer] = {}  # by isolation level
        self._probe_thread = concurrent.futures.ThreadPoolExecutor(1, "meta-ends")
        self._ends: Fresh[dict[str, int]] = Fresh(self._query_ends)
        self._written_ends: Fresh[dict[str, int]] = Fresh(self._query_written_ends)
        self._identity: dict[str, str] | None = None  # known once replayed
        self.resumed_from: dict[str, int] | None = None  # the checkpoint the replay resumed
        self.clock_ms: Callable[[], int] = lambda: int(time.time() * 1000)

    @property
    def resumable(self) -> tuple[str, str, str]:
        """The topics whose state the catalog's file holds (and checkpoints)."""
        return (self.topics.meta, self.topics.producers, self.topics.snapshots)

    def checkpoint(self) -> bool:
        """Save the catalog's file with the positions applied so far, at once (at stop);
        False before the replay is over."""
        cut = self._cut()
        if cut is None:
            return False
        self.catalog.save(cut, self._identity or {}, self.clock_ms())
        return True

    async def checkpoint_gently(self) -> bool:
        """`checkpoint`, writing the rows changed in memory a few hundred at a time with the
        event loop's other work in between (4096 dirty streams and producer states take
        ≈ 90 ms to write: not one stall)."""
        cut = self._cut()
        if cut is None:
            return False
        for step in self.catalog.dirty():
            step()
            await asyncio.sleep(0)
        self.catalog.save(cut, self._identity or {}, self.clock_ms(), dirty=False)
        return True

    def _cut(self) -> dict[str, int] | None:
        """The positions a checkpoint taken now may claim (on the event loop, between followed
        batches: every record below them is in the catalog), or None before the replay is
        over. A position stays below any record of this instance whose commit is still open:
        the follower may have passed its echo before the commit reached the catalog."""
        if self._identity is None:
            return None
        positions = {}
        for topic in self.resumable:
            position = self._positions.get(topic, 0)
            floor = self.catalog.echoes.floor(topic)
            positions[topic] = position if floor is None else min(position, floor)
        return positions

    async def replay(self) -> int:
        """Apply every committed record to the catalog, up to the end; return how many."""
        return int(await self._on_thread(self._replay))

    async def follow(self) -> None:
        """Apply other instances' changes and wake live readers; runs until cancelled."""
        while True:
            messages = await self._on_thread(self._poll)
            for message in messages:
                self._follow_one(message)
            self._progress.set()
            self._progress = asyncio.Event()

    async def caught_up(self) -> None:
        """Return once everything committed to the state topics so far has been followed."""
        await self._reach(await self._ends.get(), self.timeout_s)

    async def seen_written(self, within_s: float = WRITTEN_WAIT_S) -> None:
        """Return once every record written to the meta topic so far has been followed, or its
        transaction aborted: a commit already acknowledged whose markers are not written yet
        included (see the module's docstring). Waits for the transactions open now to end, for
        at most `within_s` (else LogUnavailable): one left open by an instance that died is
        ended only when its slot's next owner fences it, seconds later, and the writes that
        wait here need not stall that long for a race of milliseconds."""
        await self._reach(await self._written_ends.get(), within_s)

    async def measure(self, view: ViewAge) -> bool:
        """Note in `view` that every change acknowledged before now is followed, once it is
        (`adapter/state/view_age.py`); False if that could not be told within its bound."""
        asked_at = view.clock()  # before the question: the ends are taken after it
        try:
            # Asked at once rather than shared through `seen_written`: a shared query may have
            # started before `asked_at`, and a queued one ages the answer by the one before.
            ends = await self._query_written_ends()
            await self._reach(ends, view.max_age_s)
        except LogUnavailable as error:
            log.debug("the view's currency not measured: %s", error)
            return False
        view.reached(asked_at)
        return True

    async def keep_current(self, view: ViewAge) -> None:
        """`measure` over and over, a few times within the view's bound; until cancelled.

        Not current for `STALLED_S` on end, the consumers are made again, from the
        bootstrap servers (`renew_consumers`, why: `topology/client_stalls.py`): a follower left
        without brokers would keep the instance's view stale, every read at a tail and every
        write refused, until it was restarted."""
        every_s = min(MEASURE_EVERY_S, view.max_age_s / 4)
        stall = Stall(STALLED_S)
        while True:
            began = view.clock()
            if stall.too_long(not await self.measure(view), began):
                log.warning(
                    "the state topics' follower has not been current for %.0fs: making its "
                    "consumers again, from the bootstrap servers",
                    stall.limit_s,
                )
                await self.renew_consumers()
            await asyncio.sleep(max(0.0, began + every_s - view.clock()))  # slow: go on at once

    async def _reach(self, ends: dict[str, int], within_s: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within_s
        while any(self._positions.get(topic, 0) < end for topic, end in ends.items()):
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise LogUnavailable(f"following the state topics stalled before {ends}")
            progress = self._progress
            try:
                await asyncio.wait_for(progress.wait(), remaining)
            except TimeoutError:
                continue

    def lag(self) -> dict[str, int]:
        """Records of each state topic (by kind: `meta`, `producers`, ...) not followed yet,
        from the watermarks the last fetch brought: no request to the broker."""
        consumer = self._consumer
        if consumer is None:
            return {}
        lags = {}
        for kind, topic in self.topics.by_kind().items():
            try:
                _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), cached=True)
            except KafkaException:
                continue
            if high >= 0:
                lags[kind] = max(0, high - self._positions.get(topic, 0))
        return lags

    async def _query_ends(self) -> dict[str, int]:
        state = (self.topics.meta, self.topics.producers, self.topics.snapshots, self.topics.tier)
        return await self._query(state, "read_committed")  # the stable ends

    async def _query_written_ends(self) -> dict[str, int]:
        return await self._query((self.topics.meta,), "read_uncommitted")  # the high watermark

    async def _query(self, topics: Sequence[str], isolation: str) -> dict[str, int]:
        loop = asyncio.get_running_loop()
        ends: dict[str, int] = await loop.run_in_executor(
            self._probe_thread, self._end_offsets, topics, isolation
        )
        return ends

    def _end_offsets(self, topics: Sequence[str], isolation: str) -> dict[str, int]:
        """The partitions' ends as a consumer of `isolation` sees them (librdkafka answers the
        stable end to a read_committed one, the high watermark to a read_uncommitted one)."""
        if self._consumer is None:
            raise LogUnavailable("the follower has not replayed yet")
        probe = self._probes.get(isolation)
        if probe is None:
            group = f"{self._config['group.id']}-ends-{isolation}"
            probe = self.kafka.consumer(
                self._config | {"group.id": group, "isolation.level": isolation}
            )
            self._probes[isolation] = probe
        ends = {}
        for topic in topics:
            try:
                _, high = probe.get_watermark_offsets(
                    TopicPartition(topic, 0), self.timeout_s, cached=False
                )
            except KafkaException as error:
                # A fresh handle next time. A probe is never assigned, so nothing refreshes its
                # metadata: one whose query failed while a killed broker came back answers
                # "Local: Unknown partition" at once, without asking, until the broker list
                # next changes (10 of 13 such episodes lasted over 100 s; a probe re-created
                # after an error never had one; a broker kill in the fault suite showed it).
                del self._probes[isolation]
                probe.close()
                raise LogUnavailable(f"end offsets of {topic}: {error}") from error
            ends[topic] = high
        return ends

    def _follow_one(self, message: Message) -> None:
        topic = message.topic() or ""
        error = message.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                self._advance(topic, message.offset() or 0)
            else:
                log.warning("following %s: %s", topic, error)
            return
        offset = message.offset() or 0
        self._advance(topic, offset + 1)
        key = (message.key() or b"").decode()
        if topic == self.topics.owners:
            self.catalog.apply_owner(key, message.value(), offset)
            self.on_owner()
        elif self.catalog.echoes.is_news(topic, key, offset, message.value()):
            self._apply_news(topic, key, message.value())
        elif topic == self.topics.meta:  # the echo of a commit of ours: applied when it committed
            self.catalog.echoed(key, message.value())

    def _apply_news(self, topic: str, key: str, value: bytes | None) -> None:
        if topic == self.topics.producers:
            self.catalog.apply_producer(key, value)
        elif topic == self.topics.snapshots:
            self.catalog.apply_snapshot(key, value)
        elif topic == self.topics.tier:
            self.catalog.tier.apply(key, value)
        else:
            self.catalog.apply(key, value)
            self.on_change(key)

    def wrote(self, state: Sequence[StateWritten]) -> None:
        """A slot writer is about to commit these state records (on its thread)."""
        self.catalog.echoes.wrote([(record.topic, record.key, record.offset) for record in state])

    def settled(self, state: Sequence[StateWritten], applied: bool) -> None:
        """A commit's outcome reached the catalog (applied), or it never will (unknown or
        aborted, answered 503): then its echoes are news, and one already seen applies now."""
        written = [(record.topic, record.key, record.offset) for record in state]
        for topic, key, value in self.catalog.echoes.settled(written, applied):
            log.warning("applying %s %r: its commit's outcome was not learned", topic, key)
            self._apply_news(topic, key, value)

    def _advance(self, topic: str, position: int) -> None:
        self._positions[topic] = max(self._positions.get(topic, 0), position)

    async def close(self) -> None:
        if self._consumer is not None:
            await self._on_thread(self._consumer.close)
        # On the probes' own thread, after any query still running there: a query that fails
        # drops its probe from the dict, which must not happen while it is walked.
        await asyncio.get_running_loop().run_in_executor(self._probe_thread, self._close_probes)
        self._thread.shutdown(wait=False, cancel_futures=True)
        self._probe_thread.shutdown(wait=False, cancel_futures=True)

    async def renew_consumers(self) -> None:
        """New consumers, which read the client's files again (a rotated certificate): the
        follower's, between two polls, resuming where the old one stopped; the end probes',
        made again at their next query."""
        await self._on_thread(self._renew_consumer)
        await asyncio.get_running_loop().run_in_executor(self._probe_thread, self._close_probes)

    def _renew_consumer(self) -> None:
        old = self._consumer
        if old is None:
            return  # not replayed yet: the replay makes one
        try:
            fresh = self.kafka.consumer(self._config)
        except KafkaException as error:  # librdkafka refused the new files: the old one stays
            log.error("the state follower's consumer not renewed: %s", error)
            return
        fresh.assign([self._resumed(position) for position in old.position(old.assignment())])
        self._consumer = fresh
        old.close()

    def _resumed(self, position: TopicPartition) -> TopicPartition:
        """Where the old consumer would have fetched next (what its polls returned is being
        applied); where the follower is, if it fetched nothing since its assignment."""
        offset = position.offset
        if offset < 0:
            offset = self._positions.get(position.topic, OFFSET_BEGINNING)
        return TopicPartition(position.topic, position.partition, offset)

    def _close_probes(self) -> None:
        while self._probes:
            _, probe = self._probes.popitem()
            probe.close()

    async def _on_thread(self, fn: Callable[[], Any]) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._thread, fn)

    def _replay(self) -> int:
        consumer = self._consumer or self.kafka.consumer(self._config)
        self._consumer = consumer
        topics = [
            self.topics.meta,
            self.topics.producers,
            self.topics.owners,
            self.topics.snapshots,
            self.topics.tier,
        ]
        try:
            marks = {topic: self._watermarks(consumer, topic) for topic in topics}
            identity = self._identity_of()
            resume = self._resume_points(marks, identity)
            if resume is None:
                self.catalog.reset()
                resume = {}
            else:
                self.catalog.resume()
                log.info("resuming the catalog from its file at %s", resume)
            self.resumed_from = resume or None
            starts = [TopicPartition(t, 0, resume.get(t, marks[t][0])) for t in topics]
            consumer.assign(starts)
            applied = self._apply_until_end(consumer, set(topics))
        except KafkaException as error:
            asked = {
                "Topic": ("Read", f"{self.topics.meta} (and the other state topics)"),
                "Group": ("Read", str(self._config["group.id"])),  # FindCoordinator checks it
            }
            refusal = refusal_of(error, asked)
            raise LogUnavailable(f"replaying {topics}: {refusal or error}") from error
        self._identity = identity
        return applied

    def _watermarks(self, consumer: Consumer, topic: str) -> tuple[int, int]:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), self.timeout_s)
        return int(low), int(high)

    def _identity_of(self) -> dict[str, str]:
        """The cluster id and the resumable topics' ids and `delete.retention.ms`."""
        admin = self.kafka.admin_client(self.kafka.config({}, "librdkafka.follower"))
        timeout = self.timeout_s
        try:
            cluster = admin.describe_cluster(request_timeout=timeout).result(timeout)
            identity = {"cluster": str(cluster.cluster_id)}
            collection = TopicCollection(list(self.resumable))
            described = admin.describe_topics(collection, request_timeout=timeout)
            for topic, future in described.items():
                identity[f"topic:{topic}"] = str(future.result(timeout).topic_id)
            resources = [ConfigResource(ResourceType.TOPIC, topic) for topic in self.resumable]
            retention = DEFAULT_DELETE_RETENTION_MS
            for resource, future in admin.describe_configs(
                resources, request_timeout=timeout
            ).items():
                entry = _configs(future, resource.name, timeout).get("delete.retention.ms")
                if entry is not None and entry.value is not None:
                    retention = min(retention, int(entry.value))
        except concurrent.futures.TimeoutError as error:
            raise LogUnavailable(f"describing {self.resumable}: timed out") from error
        identity["delete_retention_ms"] = str(retention)
        return identity

    def _resume_points(
        self, marks: dict[str, tuple[int, int]], identity: dict[str, str]
    ) -> dict[str, int] | None:
        """Where to resume each resumable topic from the file's checkpoint, or None: rebuild."""
        saved = self.catalog.store.checkpoint()
        if saved is None:
            return None
        why = ""
        if saved.identity != identity:
            why = f"it was written for {saved.identity}, the topics are now {identity}"
        elif self.clock_ms() - saved.written_ms > int(identity["delete_retention_ms"]) // 2:
            why = "it is older than half of delete.retention.ms: tombstones may be gone"
        for topic in self.resumable:
            position, (low, high) = saved.positions.get(topic, -1), marks[topic]
            if not why and not low <= position <= high:
                why = f"{topic} at {position} is outside the log [{low}, {high}]"
        if why:
            log.info("rebuilding the catalog from the log, not from its file: %s", why)
            return None
        return dict(saved.positions)

    def _apply_until_end(self, consumer: Consumer, pending: set[str]) -> int:
        applied = 0
        deadline = time.monotonic() + self.timeout_s
        while pending and time.monotonic() < deadline:
            batch = poll_batch(consumer, 0.5)
            if batch:
                deadline = time.monotonic() + self.timeout_s  # the deadline is per stall
            for message in batch:
                if _at_end(message):
                    pending.discard(message.topic() or "")
                    self._advance(message.topic() or "", message.offset() or 0)
                    continue
                self._advance(message.topic() or "", (message.offset() or 0) + 1)
                self._apply(message)
                applied += 1
        if pending:
            raise LogUnavailable(f"replaying {sorted(pending)} stalled for {self.timeout_s}s")
        log.info("replayed %d state records", applied)
        return applied

    def _apply(self, message: Message) -> None:
        key = (message.key() or b"").decode()
        if message.topic() == self.topics.producers:
            self.catalog.apply_producer(key, message.value())
        elif message.topic() == self.topics.owners:
            self.catalog.apply_owner(key, message.value(), message.offset() or 0)
        elif message.topic() == self.topics.snapshots:
            self.catalog.apply_snapshot(key, message.value())
        elif message.topic() == self.topics.tier:
            self.catalog.tier.apply(key, message.value())
        else:
            self.catalog.apply(key, message.value())

    def _poll(self) -> list[Message]:
        if self._consumer is None:
            raise LogUnavailable("the follower has not replayed yet")
        try:
            return poll_batch(self._consumer, POLL_S)
        except KafkaException as error:
            log.warning("following %s: %s", self.topics, error)
            return []


def _at_end(message: Message) -> bool:
    error = message.error()
    if error is None:
        return False
    if error.code() == KafkaError._PARTITION_EOF:
        return True
    raise KafkaException(error)


def _configs(future: concurrent.futures.Future[Any], topic: str, timeout: float) -> Any:
    """A topic's described configs; LogUnavailable naming the ACL that refused them."""
    try:
        return future.result(timeout)
    except KafkaException as error:
        refusal = refusal_of(error, {"Topic": ("DescribeConfigs", topic)})
        if refusal is None:
            raise
        raise LogUnavailable(f"describing {topic}: {refusal}") from error
