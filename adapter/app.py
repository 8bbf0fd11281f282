"""The app factory: wires settings, Kafka, the catalog, the services and the routes together."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import AsyncIterator, Collection, Mapping
from dataclasses import dataclass

from aiohttp import web

from adapter.cluster.access_relay import AccessRelay
from adapter.cluster.deadlines import forward_timeout_s
from adapter.cluster.ownership import SlotOwnership
from adapter.cluster.routing import Router
from adapter.cluster.shared_folder import FolderGuard
from adapter.cluster.slot_writers import SlotWriters
from adapter.config import RECORD_OVERHEAD_BYTES, ConfigError, Settings, comma_list
from adapter.http import (
    bootstrap,
    buckets,
    console,
    fences,
    health,
    openapi,
    snapshots,
    streams,
    trims,
)
from adapter.http.auth import GATE, auth_middleware
from adapter.http.bodies import ROUTE_BODIES, RouteBodies
from adapter.http.body_budget import BODY_BUDGET, BodyBudget, body_budget_middleware
from adapter.http.compression import compression_middleware
from adapter.http.connections import CONNECTION_LIMITS, ConnectionLimits
from adapter.http.credentials import build_gate, jwks_refresher
from adapter.http.encoding import (
    RAW_BODIES,
    content_encoding_middleware,
    decoding_middleware,
)
from adapter.http.forward import OUTCOMES, ROUTER, forwarding_middleware
from adapter.http.hosts import allowed_hosts, host_middleware
from adapter.http.keys import BUCKETS, LIVE_LIMITS, MOUNTED, MOUNTS, SNAPSHOTS, STREAMS
from adapter.http.live import LiveLimits
from adapter.http.malformed import PARSER_LIMITS
from adapter.http.observe import METRICS, echo_request_id, observe_middleware
from adapter.http.owners import FORWARDER, Forwarder
from adapter.http.rate_limits import Limits, rate_limit_middleware
from adapter.http.render import Handler, errors_middleware
from adapter.http.request_checks import defer_continue, request_checks_middleware
from adapter.http.security import CORS, CorsPolicy, cors_middleware
from adapter.log.faults import WriterFaults
from adapter.log.hot_cache import HotCache
from adapter.log.mount_reader import SPARSE_FETCH_BYTES
from adapter.log.mount_writer import MountWriter, Transactions
from adapter.log.reader import LogReader, ReadLimits
from adapter.log.scanner import PartitionScanner
from adapter.log.writer import WriterLimits
from adapter.metrics import Metrics
from adapter.objects.base import ObjectStore
from adapter.objects.factory import object_store
from adapter.protocol import stream_machine
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.mounts import ConfiguredMount, parse_configured
from adapter.readiness import Readiness
from adapter.service.age_retention import AgeRetention
from adapter.service.buckets import BucketService
from adapter.service.fork_gc import sweep_forever
from adapter.service.forwarded import ForwardedOutcomes
from adapter.service.hub import LiveHub
from adapter.service.mount_indexes import MountIndexes
from adapter.service.mounted_streams import MountedStreams
from adapter.service.mounts import MountService
from adapter.service.reads import ReadPath
from adapter.service.seeking import Seeker
from adapter.service.snapshot_gc import SnapshotCollector
from adapter.service.snapshots import SnapshotService
from adapter.service.state_entries import owner_entry
from adapter.service.streams import StreamService, wall_clock_ms
from adapter.service.tier_gc import TierCollector
from adapter.service.tiering import TierPolicy, TierWorker
from adapter.state.catalog import Catalog
from adapter.state.currency import ViewAge
from adapter.state.follower import MetaFollower
from adapter.state.records import stream_of_key
from adapter.state.store import FileStore, catalog_file_name
from adapter.supervisor import CATALOG, CHECKS, OWNERSHIP, TIER, Durability, Supervisor
from adapter.tier.cold import ColdReader
from adapter.tier.faults import EmptyColdReader, UnwrittenStore
from topology.admin import TopologyAdmin
from topology.kafka_client import KafkaAccess
from topology.management import TopicManagement, TopicPolicy
from topology.naming import StateTopics, owners_group
from topology.slots import SlotMap
from topology.specs import TopicLayout

SETTINGS = web.AppKey("settings", Settings)
ADMIN = web.AppKey("admin", TopologyAdmin)
# Resolves with the exception that makes serving impossible (e.g. a misconfigured topic).
FATAL = web.AppKey("fatal", asyncio.Future[BaseException])


@dataclass(frozen=True)
class Parts:
    """Everything one instance runs, built from the settings without any I/O."""

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
    tiering: TierWorker
    tier_collector: TierCollector
    age_retention: AgeRetention


PARTS = web.AppKey("parts", Parts)


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


def kafka_access(settings: Settings) -> KafkaAccess:
    """How every Kafka client of this instance connects (see topology/kafka_client.py)."""
    return KafkaAccess(
        settings.bootstrap_servers, settings.topic_prefix, dict(settings.kafka_client)
    )


def configured_mounts(settings: Settings) -> tuple[ConfiguredMount, ...]:
    """The `[[mounts]]` of the settings, checked (ConfigError naming the problem)."""
    try:
        return tuple(parse_configured(table) for table in settings.mounts)
    except ProtocolError as error:
        raise ConfigError(f"[[mounts]]: {error.message}") from error


def build_parts(settings: Settings, siblings: Collection[str] = ()) -> Parts:
    faults = WriterFaults(
        every=settings.lose_commit_every,
        trust_unknown_outcomes=settings.trust_unknown_outcomes,
        crash_after_forwarded_commit=settings.crash_after_forwarded_commit,
    )
    broken_tier = settings.cold_reads_empty or settings.tier_skip_puts
    if faults.any or settings.serve_below_retention or broken_tier:
        logging.getLogger(__name__).warning(
            "test-only faults on: %s serve_below_retention=%s cold_reads_empty=%s "
            "tier_skip_puts=%s",
            faults,
            settings.serve_below_retention,
            settings.cold_reads_empty,
            settings.tier_skip_puts,
        )
    layout = topic_layout(settings)
    kafka = kafka_access(settings)
    admin = TopologyAdmin(kafka, layout, settings.kafka_timeout_s, topic_policy(settings))
    catalog = Catalog(
        FileStore(settings.catalog_dir, catalog_file_name(settings.topic_prefix)),
        settings.catalog_cache_entries,
        settings.catalog_cache_bytes,
    )
    topics = StateTopics.of(settings.topic_prefix)
    hub = LiveHub()
    metrics = Metrics()
    metrics.watch_live_waiters(lambda: hub.waiters)
    hot_tail = HotCache(settings.hot_cache_bytes, settings.catalog_cache_entries)
    writers = SlotWriters(
        kafka,
        settings.write_slots,
        WriterLimits(settings.kafka_timeout_s, settings.max_message_bytes),
        catch_up=lambda: follower.caught_up(),
        may_reinit=lambda slot: ownership.confirm(slot),
        announce=lambda slot: owner_entry(topics, slot, settings.advertised_url),
        on_state_written=lambda state: follower.wrote(state),
        on_state_settled=lambda state, applied: follower.settled(state, applied),
        faults=faults,
        on_timing=metrics.kafka_timing,
    )
    indexes = MountIndexes(
        kafka,
        catalog,
        settings.mount_index_positions_per_key,
        settings.kafka_timeout_s,
        on_keys=lambda bucket_id, ids: _keys_indexed(bucket_id, ids, hub),
        index_dir=settings.mount_index_dir,
    )
    follower = MetaFollower(
        kafka,
        topics,
        catalog,
        settings.kafka_timeout_s,
        on_change=lambda key: _changed_elsewhere(key, hot_tail, hub, indexes),
    )
    ownership = SlotOwnership(
        kafka,
        settings.advertised_url,
        settings.group_instance_id,
        settings.owner_session_timeout_ms,
        writers,
        settings.kafka_timeout_s,
    )
    router = Router(writers, catalog.owner, settings.advertised_url)
    reader = LogReader(
        kafka,
        ReadLimits(settings.read_chunk_bytes, settings.read_scan_bytes, settings.kafka_timeout_s),
    )
    bucket_service = BucketService(catalog, writers, admin, wall_clock_ms)
    store = object_store(settings)
    reads = ReadPath(
        reader,
        hot_tail,
        (EmptyColdReader if settings.cold_reads_empty else ColdReader)(
            store, settings.tier_cache_bytes
        ),
        catalog,
        check_retention=not settings.serve_below_retention,
    )
    sparse_reader = LogReader(
        kafka,
        ReadLimits(settings.read_chunk_bytes, settings.read_scan_bytes, settings.kafka_timeout_s),
        fetch_bytes=SPARSE_FETCH_BYTES,
    )
    mounted = MountedStreams(
        indexes,
        reader,
        sparse_reader,
        MountWriter(kafka, settings.kafka_timeout_s),
        hub,
        Transactions(kafka, settings.kafka_timeout_s),
        topics.producers,
        state_followed=lambda: follower.caught_up(),
    )
    stream_service = StreamService(
        catalog,
        writers,
        bucket_service,
        reads,
        hub,
        ViewAge(settings.max_view_age_ms / 1000),
        limits=stream_machine.Limits(settings.max_append_messages, settings.max_snapshot_bytes),
        mounted=mounted,
        relay=AccessRelay(router, siblings, settings.owner_renewal_entries),
        trim_settle_ms=settings.snapshot_gc_grace_ms,
    )
    scanner = PartitionScanner(kafka, settings.kafka_timeout_s)
    metrics.watch_consumer_lag(follower.lag)
    parts = Parts(
        admin,
        catalog,
        writers,
        ownership,
        router,
        reader,
        follower,
        hub,
        bucket_service,
        stream_service,
        store,
        SnapshotService(stream_service, store, settings.snapshot_gc_grace_ms),
        SnapshotCollector(
            store,
            catalog,
            follower.caught_up,
            wall_clock_ms,
            settings.snapshot_gc_grace_ms,
            settings.snapshot_gc_interval_ms / 1000,
        ),
        MountService(
            bucket_service,
            configured_mounts(settings),
            indexes.reconcile,
            comma_list(settings.mount_topics),
        ),
        mounted,
        metrics,
        scanner,
        TierWorker(
            catalog,
            writers,
            SlotMap(settings.topic_prefix, settings.write_slots),
            scanner,
            admin,
            UnwrittenStore(store) if settings.tier_skip_puts else store,
            topics.tier,
            tier_policy(settings),
            wall_clock_ms,
        ),
        TierCollector(
            catalog,
            writers,
            SlotMap(settings.topic_prefix, settings.write_slots),
            store,
            topics.tier,
            follower.caught_up,
            wall_clock_ms,
            settings.snapshot_gc_grace_ms,
            settings.snapshot_gc_interval_ms / 1000,
        ),
        AgeRetention(
            catalog,
            stream_service,
            writers,
            SlotMap(settings.topic_prefix, settings.write_slots),
            wall_clock_ms,
            settings.age_retention_interval_ms / 1000,
        ),
    )
    metrics.watch_tier(parts.tiering.lag_bytes, parts.tiering.hot_bytes)
    return parts


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
    if meta_key.startswith("mount:"):
        indexes.reconcile()


def _keys_indexed(bucket_id: str, stream_ids: set[str], hub: LiveHub) -> None:
    """Records of a mounted topic were indexed: wake the live readers of their keys."""
    for stream_id in stream_ids:
        hub.notify((bucket_id, stream_id))


def live_limits(settings: Settings) -> LiveLimits:
    return LiveLimits(
        long_poll_timeout_s=settings.long_poll_timeout_ms / 1000,
        sse_max_duration_s=settings.sse_max_duration_ms / 1000,
        sse_heartbeat_s=settings.sse_heartbeat_ms / 1000,
        sse_write_timeout_s=settings.sse_write_timeout_ms / 1000,
    )


def forwarded_outcomes(settings: Settings, parts: Parts) -> ForwardedOutcomes:
    """What a forwarder learns when a slot's owner goes silent: it waits for the next owner
    (the owners' session, then its gain: a new producer and its owner record, 6T at most)."""
    timeout_s = settings.kafka_timeout_s
    takeover_s = settings.owner_session_timeout_ms / 1000 + 6 * timeout_s
    return ForwardedOutcomes(
        parts.catalog,
        parts.buckets,
        parts.admin.kafka,
        2 * timeout_s,
        takeover_s,
        parts.follower.caught_up,
    )


def create_app(settings: Settings, siblings: Mapping[str, str] | None = None) -> web.Application:
    """The app of one instance (or worker: `siblings` maps its sibling workers' advertised URLs
    to their Unix sockets, see adapter/workers.py)."""
    budget = BodyBudget(settings.max_inflight_body_bytes, settings.max_body_bytes)
    bodies = RouteBodies(settings.max_body_bytes, settings.max_snapshot_bytes)
    parts = build_parts(settings, siblings or {})
    gate = build_gate(settings)
    cors = CorsPolicy(frozenset(comma_list(settings.cors_origins)))
    app = web.Application(
        middlewares=[
            observe_middleware(parts.metrics),
            cors_middleware(cors),
            compression_middleware,
            errors_middleware,
            host_middleware(allowed_hosts(settings)),
            auth_middleware(gate),
            content_encoding_middleware,
            rate_limit_middleware(Limits.of(settings)),
            request_checks_middleware(bodies),
            body_budget_middleware(budget, bodies),
            decoding_middleware(bodies),
            readiness_gate,
            forwarding_middleware,
        ],
        client_max_size=settings.max_body_bytes,
        handler_args=RAW_BODIES | PARSER_LIMITS,
    )
    app[SETTINGS] = settings
    app[BODY_BUDGET] = budget
    app[ROUTE_BODIES] = bodies
    app[GATE] = gate
    app[CORS] = cors
    app[CONNECTION_LIMITS] = ConnectionLimits.of(settings)
    app[PARTS] = parts
    app[METRICS] = parts.metrics
    app.on_response_prepare.append(echo_request_id)
    app[ADMIN] = parts.admin
    app[BUCKETS] = parts.buckets
    app[STREAMS] = parts.streams
    app[SNAPSHOTS] = parts.snapshots
    app[MOUNTS] = parts.mounts
    app[MOUNTED] = parts.mounted
    app[ROUTER] = parts.router
    app[FORWARDER] = Forwarder(
        forward_timeout_s(settings.kafka_timeout_s),
        siblings,
        parts.follower.seen_written,
    )
    app[OUTCOMES] = forwarded_outcomes(settings, parts)
    app[LIVE_LIMITS] = live_limits(settings)
    app[health.READINESS] = readiness = Readiness([*CHECKS, health.SERVING])
    readiness.set(health.SERVING, True, "accepting requests")
    app.add_routes(health.routes)
    app.router.add_get(openapi.PATH, openapi.openapi, expect_handler=defer_continue)
    # Before `/{bucket}/{stream}`, which `/ui/x` fits; the seeker asks Kafka for positions.
    console.add_routes(app, settings.console, Seeker(parts.reader))
    app.add_routes(buckets.routes)
    # Routes match in the order they are added. A flat stream's snapshot, bootstrap, fence and trim
    # URLs must come before `/v1/stream/{path}` (which would take them as stream paths), and
    # the bucketed ones after it (`/{bucket}/{stream}/snapshot` would take `/v1/stream/snapshot`).
    for sub_resources in (snapshots, bootstrap, fences, trims):
        sub_resources.add_routes(app, streams.FLAT_ROUTE)
    streams.add_routes(app)
    for sub_resources in (snapshots, bootstrap, fences, trims):
        sub_resources.add_routes(app, streams.BUCKETED_ROUTE)
    app.cleanup_ctx.append(_lifecycle)
    if settings.auth_mode == "jwt" and settings.auth_jwt_jwks_url:
        app.cleanup_ctx.append(jwks_refresher(settings.auth_jwt_jwks_url))
    return app


async def checkpoint_forever(follower: MetaFollower, every_s: float) -> None:
    """Save the catalog's file with the follower's positions every `every_s`."""
    while True:
        await asyncio.sleep(every_s)
        try:
            await follower.checkpoint_gently()
        except sqlite3.Error as error:  # the file is an index: the next start can rebuild it
            logging.getLogger(__name__).warning("saving the catalog's checkpoint: %s", error)


def _checkpoint(follower: MetaFollower) -> None:
    try:
        follower.checkpoint()
    except sqlite3.Error as error:  # the file is an index: the next start can rebuild it
        logging.getLogger(__name__).warning("saving the catalog's checkpoint: %s", error)


@web.middleware
async def readiness_gate(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Streams are served only once the catalog has been rebuilt from Kafka."""
    if request.app[health.READINESS].is_ok(CATALOG) or request.path in ("/healthz", "/readyz"):
        return await handler(request)
    raise ProtocolError(ErrorCode.NOT_READY, "the catalog is still being loaded from Kafka")


async def _lifecycle(app: web.Application) -> AsyncIterator[None]:
    settings, parts = app[SETTINGS], app[PARTS]
    readiness = app[health.READINESS]
    parts.writers.on_change = lambda: _report_ownership(readiness, parts)
    parts.tiering.on_pass = lambda worker: _report_tier(readiness, worker)
    _report_tier(readiness, parts.tiering)

    tasks: list[asyncio.Task[None]] = []
    guard = folder_guard(settings, parts)

    async def load_state() -> int:
        if guard is not None:  # before joining the owners' group: see shared_folder.py
            await guard.refuse_strangers()
        count = await parts.follower.replay()
        parts.mounts.load_configured()  # and index every mount
        follow = asyncio.create_task(parts.follower.follow(), name="follower")
        follow.add_done_callback(lambda done: _report(done, fatal))
        tasks.append(follow)
        await parts.follower.measure(parts.streams.view)  # ready as current as can be told
        current = asyncio.create_task(
            parts.follower.keep_current(parts.streams.view), name="view-currency"
        )
        current.add_done_callback(lambda done: _report(done, fatal))
        tasks.append(current)
        collect = asyncio.create_task(parts.collector.run(), name="snapshot-collector")
        collect.add_done_callback(lambda done: _report(done, fatal))
        tasks.append(collect)
        sweep = asyncio.create_task(
            sweep_forever(parts.streams, settings.expired_gc_grace_ms), name="soft-delete-collector"
        )
        sweep.add_done_callback(lambda done: _report(done, fatal))
        tasks.append(sweep)
        tier = asyncio.create_task(parts.tiering.run(), name="tier-worker")
        tier.add_done_callback(lambda done: _report(done, fatal))
        tasks.append(tier)
        tier_gc = asyncio.create_task(parts.tier_collector.run(), name="tier-collector")
        tier_gc.add_done_callback(lambda done: _report(done, fatal))
        tasks.append(tier_gc)
        aging = asyncio.create_task(parts.age_retention.run(), name="age-retention")
        aging.add_done_callback(lambda done: _report(done, fatal))
        tasks.append(aging)
        if settings.catalog_checkpoint_ms:
            saving = checkpoint_forever(parts.follower, settings.catalog_checkpoint_ms / 1000)
            save = asyncio.create_task(saving, name="catalog-checkpoint")
            save.add_done_callback(lambda done: _report(done, fatal))
            tasks.append(save)
        parts.ownership.start()  # join the owners' group: slots arrive from here on
        return count

    durability = Durability(
        settings.replication_factor,
        settings.min_insync_replicas,
        settings.kafka_timeout_ms,
        settings.require_durable_topics,
        settings.allow_unreplicated,
    )
    supervisor = Supervisor(
        parts.admin, parts.store, readiness, load_state, durability, folder=guard
    )
    fatal: asyncio.Future[BaseException] = asyncio.get_running_loop().create_future()
    app[FATAL] = fatal

    def fail(error: BaseException) -> None:
        if not fatal.done():
            fatal.set_result(error)

    parts.ownership.on_failure = fail  # a dead ownership thread or slot writer ends serving
    parts.writers.on_failure = fail
    tasks.append(asyncio.create_task(supervisor.run(), name="supervisor"))
    for task in tasks:
        task.add_done_callback(lambda done: _report(done, fatal))
    yield
    await parts.ownership.stop()  # hands every slot over (in-flight commits finish first)
    await parts.writers.close()
    for task in tasks:
        task.cancel()
    await asyncio.wait(tasks)  # their outcome, if any, is already in `fatal`
    if parts.streams.relay is not None:  # its tellings use the clients closed next
        await parts.streams.relay.close()
    await app[FORWARDER].close()
    _checkpoint(parts.follower)  # the next start resumes from here
    await parts.follower.close()
    await parts.mounted.indexes.close()
    await parts.mounted.writer.close()
    await parts.mounted.sparse_reader.close()
    parts.mounted.transactions.close()
    await parts.reader.close()
    await parts.scanner.close()
    parts.catalog.close()


def folder_guard(settings: Settings, parts: Parts) -> FolderGuard | None:
    """The check that every instance sees the `fs` folder, unless the operator says so."""
    if settings.cold_backend != "fs" or settings.cold_dir_shared:
        return None
    group = owners_group(settings.topic_prefix)
    return FolderGuard(
        parts.store,
        parts.admin,
        group,
        settings.group_instance_id,
        settings.advertised_url,
        parts.catalog.owner_urls,
    )


def _report_ownership(readiness: Readiness, parts: Parts) -> None:
    """Ready once the group gave us slots and every one of them accepts writes."""
    assigned, ready = parts.writers.assigned, parts.writers.ready
    owned, initialising = sorted(ready), sorted(assigned - ready)
    detail = f"owns {len(owned)}/{parts.writers.count} slots: {_listed(owned)}"
    if not parts.ownership.joined and parts.ownership.refused:
        detail += f"; {parts.ownership.refused}"
    if initialising:
        detail += f" (initialising {initialising})"
        if parts.writers.last_failure:
            detail += f"; last failure: {parts.writers.last_failure}"
    readiness.set(
        OWNERSHIP,
        parts.ownership.joined and assigned == ready,
        detail,
        joined=parts.ownership.joined,
        slot_count=parts.writers.count,
        owned_slots=owned,
        initialising=initialising,
    )


def _report_tier(readiness: Readiness, worker: TierWorker) -> None:
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


def _report(task: asyncio.Task[None], fatal: asyncio.Future[BaseException]) -> None:
    if not task.cancelled() and not fatal.done():
        error = task.exception()
        fatal.set_result(error or RuntimeError(f"{task.get_name()} stopped"))
