"""The parts of one instance, built from the settings without any I/O, each given at
construction what it calls: no part is patched after it is built."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from adapter.cluster.access_relay import AccessRelay
from adapter.cluster.catch_up import MetaCatchUp
from adapter.cluster.coordinator import Coordinator
from adapter.cluster.dead_owners import Bounds, DeadOwners, Probes
from adapter.cluster.deadlines import forward_timeout_s
from adapter.cluster.orphaned_slots import SESSIONS, OrphanedSlots
from adapter.cluster.ownership import SlotOwnership, accepts
from adapter.cluster.reach import AdvertisedReach
from adapter.cluster.routing import Moving, Router
from adapter.cluster.slot_writers import SlotWriters
from adapter.config import (
    RECORD_OVERHEAD_BYTES,
    ConfigError,
    Settings,
    comma_list,
    load_peer_key,
)
from adapter.faults_for_tests import NO_FAULTS, PlantedFaults
from adapter.http import health
from adapter.http.peers import PeerClients
from adapter.http.tls import peer_context
from adapter.kafka_stats import ClientStatistics
from adapter.live.data_wakeups import DataWakeups
from adapter.live.fanout import Fanout
from adapter.log.hot_cache import HotCache
from adapter.log.mount_reader import SPARSE_FETCH_BYTES
from adapter.log.mount_writer import MountWriter, Transactions
from adapter.log.partition_watch import PartitionWatch
from adapter.log.reader import LogReader, ReadLimits
from adapter.log.scanner import PartitionScanner
from adapter.log.transaction_turns import Turns
from adapter.log.writer import WriterLimits
from adapter.metrics import Metrics
from adapter.objects.base import ObjectStore
from adapter.objects.factory import object_store
from adapter.protocol import stream_machine
from adapter.protocol.errors import ProtocolError
from adapter.protocol.model import RELEASED
from adapter.protocol.mounts import ConfiguredMount, parse_configured
from adapter.readiness import Readiness
from adapter.running import Running
from adapter.service.age_retention import AgeRetention
from adapter.service.buckets import BucketService
from adapter.service.hub import LiveHub
from adapter.service.mount_indexes import MountIndexes
from adapter.service.mounted_streams import MountedStreams
from adapter.service.mounts import MountService
from adapter.service.reads import ReadPath
from adapter.service.slot_checkpoints import CheckpointNotes, SlotCheckpoints
from adapter.service.snapshot_gc import SnapshotCollector
from adapter.service.snapshots import SnapshotService
from adapter.service.state_entries import owner_entry
from adapter.service.streams import StreamService, wall_clock_ms
from adapter.service.tier_gc import TierCollector
from adapter.service.tiering import TierPolicy, TierWorker
from adapter.service.unanswered_writes import UnansweredWrites
from adapter.state.catalog import Catalog
from adapter.state.covered_offsets import ROLE as COVERED_ROLE
from adapter.state.covered_offsets import CoveredOffsets
from adapter.state.data_tails import DataTails
from adapter.state.faults import CoveredToTheEnd
from adapter.state.follower import MetaFollower
from adapter.state.format_gate import GATE
from adapter.state.partition_ends import PartitionEnds
from adapter.state.slot_takeover import SlotTakeover
from adapter.state.store import FileStore, catalog_file_name
from adapter.state.view_age import ViewAge
from adapter.supervisor import CHECKS, GATES, OWNERSHIP, TIER
from adapter.tasks import Tasks
from adapter.tier.cold import ColdReader
from adapter.tier.faults import EmptyColdReader, UnwrittenStore
from adapter.tracing import start as start_tracing
from topology import group_eviction
from topology.admin import TopologyAdmin
from topology.internal_records import RecordKind, meta_kind, stream_of_key
from topology.kafka_client import KafkaAccess
from topology.management import TopicManagement, TopicPolicy
from topology.naming import StateTopics, owners_group, slots_topic
from topology.slots import SlotMap
from topology.specs import TopicLayout

if TYPE_CHECKING:
    from adapter.tracing.otel import Tracing


@dataclass(frozen=True)
class Parts:
    """Everything one instance runs, built from the settings without any I/O."""

    running: Running  # what is started, closed in reverse; the background tasks
    readiness: Readiness
    admin: TopologyAdmin
    catalog: Catalog
    writers: SlotWriters
    ownership: SlotOwnership
    router: Router
    reader: LogReader
    follower: MetaFollower
    hub: LiveHub
    buckets: BucketService
    streams: StreamService
    store: ObjectStore
    snapshots: SnapshotService
    collector: SnapshotCollector
    mounts: MountService
    mounted: MountedStreams
    metrics: Metrics
    scanner: PartitionScanner
    covered: CoveredOffsets
    tails: DataTails
    wakeups: DataWakeups
    tiering: TierWorker
    tier_collector: TierCollector
    age_retention: AgeRetention
    checkpoints: SlotCheckpoints
    peers: PeerClients
    reach: AdvertisedReach
    orphaned_slots: OrphanedSlots
    dead_owners: DeadOwners
    relay: AccessRelay
    coordinator: Coordinator
    unanswered: UnansweredWrites
    fanout: Fanout
    tracing: Tracing | None  # None: tracing off (nothing of OpenTelemetry imported)


def topic_layout(settings: Settings) -> TopicLayout:
    return TopicLayout(
        prefix=settings.topic_prefix,
        partitions=settings.partitions,
        replication_factor=settings.replication_factor,
        min_insync_replicas=settings.min_insync_replicas,
        max_message_bytes=settings.max_message_bytes,
        write_slots=settings.write_slots,
    )


def topic_policy(settings: Settings) -> TopicPolicy:
    return TopicPolicy(TopicManagement(settings.topic_management))


def kafka_access(settings: Settings, statistics: ClientStatistics | None = None) -> KafkaAccess:
    """How every Kafka client of this instance connects (see topology/kafka_client.py); with
    `statistics`, each client's librdkafka statistics go there."""
    return KafkaAccess(
        settings.bootstrap_servers,
        settings.topic_prefix,
        dict(settings.kafka_client),
        statistics_interval_ms=settings.kafka_statistics_interval_ms if statistics else 0,
        on_statistics=_reporting_to(statistics) if statistics else None,
    )


def _reporting_to(statistics: ClientStatistics) -> Callable[[str, str], None]:
    return lambda role, document: statistics.report(role, document, time.monotonic())


def configured_mounts(settings: Settings) -> tuple[ConfiguredMount, ...]:
    """The `[[mounts]]` of the settings, checked (ConfigError naming the problem)."""
    try:
        return tuple(parse_configured(table) for table in settings.mounts)
    except ProtocolError as error:
        raise ConfigError(f"[[mounts]]: {error.message}") from error


def build_parts(
    settings: Settings,
    siblings: Mapping[str, str] | None = None,
    faults: PlantedFaults = NO_FAULTS,
) -> Parts:
    """Every part of one instance (`siblings`: the sibling workers' advertised URLs and Unix
    sockets, see adapter/workers.py), each built after the parts it calls, and each that runs
    tasks given a task group of its own; `faults`: what the test suites break, never set in
    production."""
    faults.warn()
    # A part's close may wait out in-flight commits (one Kafka timeout) and then its own calls.
    running = Running(close_budget_s=3 * settings.kafka_timeout_s)
    readiness = Readiness([*CHECKS, health.SERVING], GATES | {health.SERVING})
    statistics = ClientStatistics(settings.kafka_statistics_interval_ms)
    kafka = kafka_access(settings, statistics)
    admin = TopologyAdmin(
        kafka, topic_layout(settings), settings.kafka_timeout_s, topic_policy(settings)
    )
    catalog = _catalog(settings)
    hub, metrics = LiveHub(), Metrics()
    metrics.watch_live_waiters(lambda: hub.waiters)
    metrics.watch_checks(readiness.states)
    metrics.watch_kafka_clients(statistics)
    hot_tail = HotCache(settings.hot_cache_bytes, settings.catalog_cache_entries)
    indexes = _mount_indexes(settings, kafka, catalog, hub)
    membership = _Membership(readiness)
    follower = MetaFollower(
        kafka,
        StateTopics.of(settings.topic_prefix),
        catalog,
        settings.kafka_timeout_s,
        on_change=partial(_changed_elsewhere, hot_tail=hot_tail, hub=hub, indexes=indexes),
        on_owner=membership.report,
    )
    metrics.watch_consumer_lag(follower.lag)
    scanner = PartitionScanner(kafka, settings.kafka_timeout_s)
    covering = CoveredToTheEnd if faults.cover_to_the_end else CoveredOffsets
    covered = covering(PartitionScanner(kafka, settings.kafka_timeout_s, COVERED_ROLE))
    notes = CheckpointNotes(catalog, StateTopics.of(settings.topic_prefix))
    takeover = SlotTakeover(
        catalog,
        scanner,
        SlotMap(settings.topic_prefix, settings.write_slots),
        on_changed=partial(_carried_forward, hot_tail=hot_tail, hub=hub, notes=notes),
        covered=covered,
    )
    writers = _slot_writers(
        settings, kafka, follower, membership, metrics, running, faults, takeover, notes
    )
    metrics.watch_write_slots(
        settings.write_slots, lambda: len(writers.assigned), lambda: len(writers.ready)
    )
    metrics.watch_format_level(lambda: GATE.level)
    ownership = SlotOwnership(
        kafka,
        settings.advertised_url,
        settings.group_instance_id,
        settings.owner_session_timeout_ms,
        writers,
        settings.kafka_timeout_s,
        on_failure=running.fail,
    )
    membership.ownership = ownership
    router = Router(writers, catalog.owner, settings.advertised_url)
    membership.router = router
    reader = LogReader(kafka, read_limits(settings))
    catch_up = MetaCatchUp(writers, follower.seen_written)
    tails = _data_tails(settings, kafka, catalog, hot_tail, hub)
    tracing = start_tracing(settings)
    bucket_service = BucketService(catalog, writers, admin, wall_clock_ms, catch_up, tracing)
    store = object_store(settings)
    mounted = mounted_streams(settings, kafka, indexes, reader, hub, follower, tracing)
    peers = PeerClients(
        forward_timeout_s(settings.kafka_timeout_s),
        siblings,
        settings.peer_connect_timeout_ms / 1000,
        load_peer_key(settings),
        peer_context(settings),
    )
    reach = _advertised_reach(settings, peers, catalog, ownership, membership)
    dead_owners = _dead_owners(settings, kafka, peers, siblings, metrics)
    metrics.watch_advertised_reach(lambda: reach.reachable)
    relay = AccessRelay(
        router, part_tasks(settings), (siblings or {}).keys(), settings.owner_renewal_entries
    )
    stream_service = StreamService(
        catalog,
        writers,
        bucket_service,
        _read_path(settings, reader, hot_tail, store, catalog, faults),
        hub,
        ViewAge(settings.max_view_age_ms / 1000),
        limits=stream_machine.Limits(settings.max_append_messages, settings.max_snapshot_bytes),
        mounted=mounted,
        relay=relay,
        trim_settle_ms=settings.snapshot_gc_grace_ms,
        tracing=tracing,
        catch_up=catch_up,
        tails=tails,
        notes=notes,
    )
    checkpoints = SlotCheckpoints(
        notes,
        writers,
        settings.slot_checkpoint_ms / 1000,
        busy=stream_service.writes.busy,
        flush_within_s=settings.kafka_timeout_s * 2,
        covered=covered,
    )
    tiering = _tier_worker(
        settings, catalog, writers, scanner, admin, store, readiness, faults, checkpoints.flush
    )
    metrics.watch_tier(tiering.lag_bytes, tiering.hot_bytes)
    return Parts(
        running=running,
        readiness=readiness,
        admin=admin,
        catalog=catalog,
        writers=writers,
        ownership=ownership,
        router=router,
        reader=reader,
        follower=follower,
        hub=hub,
        buckets=bucket_service,
        streams=stream_service,
        store=store,
        snapshots=SnapshotService(stream_service, store, settings.snapshot_gc_grace_ms),
        collector=_snapshot_collector(settings, store, catalog, follower),
        mounts=MountService(
            bucket_service,
            configured_mounts(settings),
            indexes.reconcile,
            comma_list(settings.mount_topics),
        ),
        mounted=mounted,
        metrics=metrics,
        scanner=scanner,
        covered=covered,
        tails=tails,
        wakeups=DataWakeups(
            hub,
            catalog,
            tails,
            PartitionWatch(kafka, settings.kafka_timeout_s),
            stream_service.native.written_elsewhere,
        ),
        tiering=tiering,
        tier_collector=_tier_collector(settings, catalog, writers, store, follower),
        age_retention=AgeRetention(
            catalog,
            stream_service,
            writers,
            SlotMap(settings.topic_prefix, settings.write_slots),
            wall_clock_ms,
            settings.age_retention_interval_ms / 1000,
            metrics.age_retention_failures.inc,
        ),
        checkpoints=checkpoints,
        peers=peers,
        reach=reach,
        orphaned_slots=OrphanedSlots(
            settings.advertised_url,
            settings.write_slots,
            catalog.owner,
            lambda: writers.assigned,
            ownership.rejoin,
            SESSIONS * settings.owner_session_timeout_ms / 1000,
            lambda: ownership.aside,
        ),
        dead_owners=dead_owners,
        relay=relay,
        coordinator=Coordinator(
            router,
            catalog,
            stream_service,
            bucket_service.slots,
            catch_up,
            (siblings or {}).keys(),
        ),
        unanswered=unanswered_writes(settings, catalog, bucket_service, follower),
        fanout=Fanout(stream_service, settings.sse_heartbeat_ms / 1000, part_tasks(settings)),
        tracing=tracing,
    )


def part_tasks(
    settings: Settings, on_failure: Callable[[BaseException], None] | None = None
) -> Tasks:
    """A part's task group: a task cancelled at close ends once its thread's Kafka call does."""
    return Tasks(on_failure, close_budget_s=settings.kafka_timeout_s)


def _catalog(settings: Settings) -> Catalog:
    return Catalog(
        FileStore(settings.catalog_dir, catalog_file_name(settings.topic_prefix)),
        settings.catalog_cache_entries,
        settings.catalog_cache_bytes,
    )


def _mount_indexes(
    settings: Settings, kafka: KafkaAccess, catalog: Catalog, hub: LiveHub
) -> MountIndexes:
    return MountIndexes(
        kafka,
        catalog,
        settings.mount_index_positions_per_key,
        settings.kafka_timeout_s,
        on_keys=partial(_keys_indexed, hub=hub),
        tasks=part_tasks(settings),
        index_dir=settings.mount_index_dir,
    )


def _slot_writers(
    settings: Settings,
    kafka: KafkaAccess,
    follower: MetaFollower,
    membership: _Membership,
    metrics: Metrics,
    running: Running,
    faults: PlantedFaults,
    takeover: SlotTakeover,
    notes: CheckpointNotes,
) -> SlotWriters:
    topics = StateTopics.of(settings.topic_prefix)
    return SlotWriters(
        kafka,
        settings.write_slots,
        WriterLimits(settings.kafka_timeout_s, settings.max_message_bytes),
        catch_up=follower.caught_up,
        may_reinit=membership.confirm,
        announce=partial(owner_entry, topics, url=settings.advertised_url),
        tasks=part_tasks(settings, on_failure=running.fail),  # a dead writer stops the process
        on_state_written=follower.wrote,
        on_state_settled=follower.settled,
        faults=faults.writer_faults(),
        on_timing=metrics.kafka_timing,
        on_change=membership.report,
        turns=Turns(settings.concurrent_transactions),
        recover=takeover.recover,
        # The slot's checkpoint, then its release (`RELEASED`), after its last commit.
        hand_over=lambda slot: [*notes.hand_over(slot), owner_entry(topics, slot, url=RELEASED)],
    )


def _read_path(
    settings: Settings,
    reader: LogReader,
    hot_tail: HotCache,
    store: ObjectStore,
    catalog: Catalog,
    faults: PlantedFaults,
) -> ReadPath:
    cold = (EmptyColdReader if faults.cold_reads_empty else ColdReader)(
        store, settings.tier_cache_bytes
    )
    return ReadPath(
        reader, hot_tail, cold, catalog, check_retention=not faults.serve_below_retention
    )


def _tier_worker(
    settings: Settings,
    catalog: Catalog,
    writers: SlotWriters,
    scanner: PartitionScanner,
    admin: TopologyAdmin,
    store: ObjectStore,
    readiness: Readiness,
    faults: PlantedFaults,
    before_free: Callable[[int, list[tuple[str, str]]], Awaitable[None]],
) -> TierWorker:
    return TierWorker(
        catalog,
        writers,
        SlotMap(settings.topic_prefix, settings.write_slots),
        scanner,
        admin,
        UnwrittenStore(store) if faults.tier_skip_puts else store,
        StateTopics.of(settings.topic_prefix).tier,
        tier_policy(settings),
        wall_clock_ms,
        on_pass=partial(report_tier, readiness),
        before_free=before_free,
    )


def _tier_collector(
    settings: Settings,
    catalog: Catalog,
    writers: SlotWriters,
    store: ObjectStore,
    follower: MetaFollower,
) -> TierCollector:
    return TierCollector(
        catalog,
        writers,
        SlotMap(settings.topic_prefix, settings.write_slots),
        store,
        StateTopics.of(settings.topic_prefix).tier,
        follower.caught_up,
        wall_clock_ms,
        settings.snapshot_gc_grace_ms,
        settings.snapshot_gc_interval_ms / 1000,
    )


def _snapshot_collector(
    settings: Settings, store: ObjectStore, catalog: Catalog, follower: MetaFollower
) -> SnapshotCollector:
    return SnapshotCollector(
        store,
        catalog,
        follower.caught_up,
        wall_clock_ms,
        settings.snapshot_gc_grace_ms,
        settings.snapshot_gc_interval_ms / 1000,
    )


def read_limits(settings: Settings) -> ReadLimits:
    return ReadLimits(
        settings.read_chunk_bytes,
        settings.read_scan_bytes,
        settings.kafka_timeout_s,
        traces=bool(settings.tracing_endpoint),
    )


def mounted_streams(
    settings: Settings,
    kafka: KafkaAccess,
    indexes: MountIndexes,
    reader: LogReader,
    hub: LiveHub,
    follower: MetaFollower,
    tracing: Tracing | None = None,
) -> MountedStreams:
    """The streams of mounted topics: read through the index of each topic's keys."""
    return MountedStreams(
        indexes,
        reader,
        LogReader(kafka, read_limits(settings), fetch_bytes=SPARSE_FETCH_BYTES),
        MountWriter(kafka, settings.kafka_timeout_s),
        hub,
        Transactions(kafka, settings.kafka_timeout_s),
        StateTopics.of(settings.topic_prefix).producers,
        state_followed=follower.caught_up,
        max_append_messages=settings.max_append_messages,
        tracing=tracing,
    )


def _advertised_reach(
    settings: Settings,
    peers: PeerClients,
    catalog: Catalog,
    ownership: SlotOwnership,
    membership: _Membership,
) -> AdvertisedReach:
    """The check that peers can reach this instance where it says they can."""
    url = settings.advertised_url
    reach = AdvertisedReach(
        url,
        partial(peers.answers, url),
        partial(_peers_answer, peers, catalog, url),
        ownership.step_aside,
        membership.report,
    )
    membership.reach = reach
    return reach


def _dead_owners(
    settings: Settings,
    kafka: KafkaAccess,
    peers: PeerClients,
    siblings: Mapping[str, str] | None,
    metrics: Metrics,
) -> DeadOwners:
    """What removes an owner that is gone, or paused past `owner_unanswered_ms`, from the
    owners' group."""
    connect_s = settings.peer_connect_timeout_ms / 1000
    evict = partial(
        group_eviction.evict,
        kafka,
        owners_group(settings.topic_prefix),
        slots_topic(settings.topic_prefix),
        session_ms=settings.owner_session_timeout_ms,
        timeout_s=settings.kafka_timeout_s,
    )
    dead_owners = DeadOwners(
        Probes(lambda url: asyncio.to_thread(accepts, url, connect_s), peers.answers),
        lambda url: asyncio.to_thread(evict, url),
        Bounds(settings.owner_refused_ms / 1000, settings.owner_unanswered_ms / 1000),
        (siblings or {}).keys(),
        metrics.owner_eviction,
    )
    peers.on_failure = dead_owners.suspect
    peers.on_unanswered = dead_owners.unanswered
    return dead_owners


async def _peers_answer(peers: PeerClients, catalog: Catalog, own_url: str) -> bool:
    """Whether another owner of slots answers at its advertised URL."""
    others = catalog.owner_urls() - {own_url}
    return any(await asyncio.gather(*(peers.answers(url) for url in others)))


class _Membership:
    """The owners' group membership as the slot writers see it. Each needs the other, so the
    writers are built first with this, and the membership is set here once it is built,
    before anything runs: a writer asks it whether a slot is still ours (`confirm`), and
    every change of the writers is told to readiness (`report`)."""

    def __init__(self, readiness: Readiness) -> None:
        self.readiness = readiness
        self.ownership: SlotOwnership | None = None
        self.router: Router | None = None
        self.reach: AdvertisedReach | None = None

    def confirm(self, slot: int) -> bool:
        return self.ownership is not None and self.ownership.confirm(slot)

    def report(self) -> None:
        """Told every change of the writers, and every owner record the follower applies."""
        if self.ownership is not None and self.router is not None:
            _report_ownership(self.readiness, self.ownership, self.router, self.reach)


def tier_policy(settings: Settings) -> TierPolicy:
    # A range's manifest record lists its chunks (under 512 bytes each): it must fit a record.
    per_record = (settings.max_message_bytes - RECORD_OVERHEAD_BYTES) // 512
    return TierPolicy(
        after_bytes=settings.tier_after_bytes,
        after_ms=settings.tier_after_ms,
        interval_s=settings.tier_interval_ms / 1000,
        max_streams_per_range=max(1, min(1000, per_record)),
        commit_within_ms=settings.snapshot_gc_grace_ms // 2,
        retention_grace_ms=settings.snapshot_gc_grace_ms,
    )


def _changed_elsewhere(
    meta_key: str, hot_tail: HotCache, hub: LiveHub, indexes: MountIndexes
) -> None:
    """A meta record not written by this instance: its hot tail of the stream may lack what
    was written (by a new owner, or a commit this instance never applied), so reads of it go
    to Kafka until this instance writes it again; its live readers wake. A mount record
    starts or stops the mount's index."""
    key = stream_of_key(meta_key)
    hot_tail.forget(key)
    hub.notify(key)
    if meta_kind(meta_key) is RecordKind.MOUNT_META:
        indexes.reconcile()


def _data_tails(
    settings: Settings, kafka: KafkaAccess, catalog: Catalog, hot_tail: HotCache, hub: LiveHub
) -> DataTails:
    """Streams written elsewhere brought to their tail from their partitions: its own end
    queries and scans, never queued behind the tier worker's."""
    timeout_s = settings.kafka_timeout_s
    return DataTails(
        catalog,
        PartitionEnds(kafka, timeout_s),
        PartitionScanner(kafka, timeout_s, role="tails"),
        settings.read_scan_bytes,
        on_moved=partial(_moved_elsewhere, hot_tail=hot_tail, hub=hub),
    )


def _moved_elsewhere(key: tuple[str, str], hot_tail: HotCache, hub: LiveHub) -> None:
    """A stream written elsewhere was learned further on from its records: its hot tail here
    may lack them (reads go to Kafka), and its live readers wake."""
    hot_tail.forget(key)
    hub.notify(key)


def _carried_forward(
    slot: int,
    key: tuple[str, str],
    producers: list[str],
    first: int,
    last: int,
    hot_tail: HotCache,
    hub: LiveHub,
    notes: CheckpointNotes,
) -> None:
    """A stream of a gained slot carried forward over records its state did not show, or
    ahead of its state records already: its hot tail here may lack them, its live readers
    wake, and the slot's next checkpoint writes it."""
    hot_tail.forget(key)
    hub.notify(key)
    notes.changed(slot, key, None, first, last)
    for producer_id in producers:
        notes.changed(slot, key, producer_id, first, last)


def _keys_indexed(bucket_id: str, stream_ids: set[str], hub: LiveHub) -> None:
    """Records of a mounted topic were indexed: wake the live readers of their keys."""
    for stream_id in stream_ids:
        hub.notify((bucket_id, stream_id))


def unanswered_writes(
    settings: Settings, catalog: Catalog, buckets: BucketService, follower: MetaFollower
) -> UnansweredWrites:
    """What a forwarder learns when a slot's owner goes silent: it waits for the next owner
    (the owners' session, then its gain: a new producer and its owner record, 6T at most)."""
    timeout_s = settings.kafka_timeout_s
    takeover_s = settings.owner_session_timeout_ms / 1000 + 6 * timeout_s
    return UnansweredWrites(
        catalog,
        buckets,
        buckets.admin.kafka,
        2 * timeout_s,
        takeover_s,
        follower.caught_up,
        follower.seen_written,
    )


def _report_ownership(
    readiness: Readiness,
    ownership: SlotOwnership,
    router: Router,
    reach: AdvertisedReach | None = None,
) -> None:
    """Ready once the group gave us slots and every one of them accepts writes. Also told:
    the slots whose writes this instance would answer 503 for now (neither its own, nor of an
    owner it knows: a rebalance under way, or an owner record not followed yet)."""
    writers = ownership.writers
    assigned, ready = writers.assigned, writers.ready
    owned, initialising = sorted(ready), sorted(assigned - ready)
    unroutable = [s for s in range(writers.count) if isinstance(router.route(s), Moving)]
    detail = f"owns {len(owned)}/{writers.count} slots: {_listed(owned)}"
    if not ownership.joined and ownership.refused:
        detail += f"; {ownership.refused}"
    if initialising:
        detail += f" (initialising {initialising})"
        if writers.last_failure:
            detail += f"; last failure: {writers.last_failure}"
    if unroutable:
        detail += f"; writes to {_listed(unroutable)} answered 503 until their owner is known"
    reachable = reach is None or reach.reachable
    if not reachable:
        detail += "; the advertised URL cannot be reached: peers cannot forward writes here"
        if ownership.aside:
            detail += ", so this instance left the owners' group"
    readiness.set(
        OWNERSHIP,
        ownership.joined and assigned == ready,
        detail,
        joined=ownership.joined,
        slot_count=writers.count,
        owned_slots=owned,
        initialising=initialising,
        unroutable_slots=unroutable,
        advertised_reachable=reachable,
    )


def report_tier(readiness: Readiness, worker: TierWorker) -> None:
    """Tier lag is shown, never a reason to refuse: Kafka keeps everything meanwhile."""
    partitions = list(worker.partitions.values())
    lag = sum(p.lag_bytes for p in partitions)
    hot = sum(p.hot_bytes for p in partitions)
    detail = f"{len(partitions)} owned partitions, {hot} hot bytes, lag {lag} bytes"
    if worker.last_error:
        detail += f"; last pass failed: {worker.last_error}"
    readiness.set(
        TIER,
        True,
        detail,
        partitions=len(partitions),
        hot_bytes=hot,
        lag_bytes=lag,
        last_error=worker.last_error,
    )


def _listed(slots: list[int]) -> str:
    return ",".join(str(k) for k in slots) or "none"
