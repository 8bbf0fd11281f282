"""The app factory: the routes and middlewares over the parts, and their lifecycle: each part
started in order (those open from their construction first), all closed in reverse."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Mapping
from dataclasses import dataclass
from functools import partial

from aiohttp import web
from aiohttp.typedefs import Middleware
from confluent_kafka import KafkaException

from adapter.auth.static_tokens import TokenFile
from adapter.cluster.shared_folder import FolderGuard
from adapter.config import Settings, comma_list
from adapter.faults_for_tests import NO_FAULTS, PlantedFaults
from adapter.http import console, health, openapi, routes
from adapter.http.auth import GATE, Gate, KeySource, auth_middleware
from adapter.http.bodies import ROUTE_BODIES, RouteBodies
from adapter.http.body_budget import BODY_BUDGET, BodyBudget, body_budget_middleware
from adapter.http.compression import compression_middleware
from adapter.http.connections import CONNECTION_LIMITS, ConnectionLimits
from adapter.http.credentials import build_gate
from adapter.http.encoding import (
    RAW_BODIES,
    content_encoding_middleware,
    decoding_middleware,
)
from adapter.http.forward import COORDINATOR, UNANSWERED, forwarding_middleware
from adapter.http.hosts import allowed_hosts, host_middleware
from adapter.http.keys import BUCKETS, FANOUT, LIVE_LIMITS, MOUNTED, MOUNTS, SNAPSHOTS, STREAMS
from adapter.http.live import LiveLimits
from adapter.http.malformed import PARSER_LIMITS
from adapter.http.observe import METRICS, echo_request_id, observe_middleware
from adapter.http.peer_headers import peer_headers_middleware, refused_from_outside
from adapter.http.peers import PEERS
from adapter.http.rate_limits import RateLimits, rate_limit_middleware
from adapter.http.render import Handler, errors_middleware
from adapter.http.request_checks import request_checks_middleware
from adapter.http.route_table import Table, install
from adapter.http.security import CORS, CorsPolicy, cors_middleware
from adapter.kafka_secrets import watch_kafka_secrets
from adapter.parts import Parts, build_parts, report_tier
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.running import Part
from adapter.secret_files import SecretFiles
from adapter.service.fork_gc import sweep_forever
from adapter.service.seeking import Seeker
from adapter.state.follower import MetaFollower
from adapter.state.format_gate import GATE as FORMAT_GATE
from adapter.state.format_gate import member_reads
from adapter.supervisor import CATALOG, Durability, Supervisor
from adapter.tasks import Tasks
from topology.admin import TopologyAdmin
from topology.errors import TopologyError
from topology.group_members import describe
from topology.internal_records import NEWEST_LEVEL
from topology.naming import owners_group

SETTINGS = web.AppKey("settings", Settings)
ADMIN = web.AppKey("admin", TopologyAdmin)
# Resolves with the exception that makes serving impossible (e.g. a misconfigured topic).
FATAL = web.AppKey("fatal", asyncio.Future[BaseException])
PARTS = web.AppKey("parts", Parts)
SECRET_FILES = web.AppKey("secret_files", SecretFiles)


def live_limits(settings: Settings) -> LiveLimits:
    return LiveLimits(
        long_poll_timeout_s=settings.long_poll_timeout_ms / 1000,
        sse_max_duration_s=settings.sse_max_duration_ms / 1000,
        sse_heartbeat_s=settings.sse_heartbeat_ms / 1000,
        sse_write_timeout_s=settings.sse_write_timeout_ms / 1000,
    )


def create_app(
    settings: Settings,
    siblings: Mapping[str, str] | None = None,
    table: Table | None = None,
    faults: PlantedFaults = NO_FAULTS,
) -> web.Application:
    """The app of one instance (or worker: `siblings` maps its sibling workers' advertised URLs
    to their Unix sockets, see adapter/workers.py); `table`: its routes, if not every route
    the settings serve."""
    budget = BodyBudget(settings.max_inflight_body_bytes, settings.max_body_bytes)
    bodies = RouteBodies(settings.max_body_bytes, settings.max_snapshot_bytes)
    parts = build_parts(settings, siblings, faults)
    gate = build_gate(settings)
    cors = CorsPolicy(frozenset(comma_list(settings.cors_origins)))
    limits = ConnectionLimits.of(settings)
    app = web.Application(
        middlewares=[
            observe_middleware(parts.metrics),
            *_traced(parts),
            cors_middleware(cors),
            compression_middleware,
            errors_middleware,
            host_middleware(allowed_hosts(settings)),
            peer_headers_middleware(limits.peer_key),  # before auth reads a certificate's
            auth_middleware(gate),
            content_encoding_middleware,
            rate_limit_middleware(RateLimits.of(settings)),
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
    app[CONNECTION_LIMITS] = limits
    app[LIVE_LIMITS] = live_limits(settings)
    app.on_response_prepare.append(echo_request_id)
    _hand_parts(app, parts)
    add_routes(app, settings, parts, table)
    app[SECRET_FILES] = _secret_files(settings, gate, parts)
    app.cleanup_ctx.append(partial(_lifecycle, jwks=gate.keys))
    return app


def _traced(parts: Parts) -> list[Middleware]:
    """The request span middleware when tracing is on; nothing at all when it is off."""
    if parts.tracing is None:
        return []
    from adapter.http.tracing import tracing_middleware  # imports the SDK: only when on

    return [tracing_middleware(parts.tracing)]


def _secret_files(settings: Settings, gate: Gate, parts: Parts) -> SecretFiles:
    """The files holding secrets this app reloads when they change (`serve` adds the TLS
    files: the listeners' context is its own)."""
    files = SecretFiles(settings.secret_poll_ms / 1000, Tasks())
    if isinstance(gate.verifier, TokenFile):
        files.watch("auth_token_file", [settings.auth_token_file], gate.verifier.reload)
    watch_kafka_secrets(files, settings, parts.admin.kafka, partial(renew_kafka_clients, parts))
    return files


async def renew_kafka_clients(parts: Parts) -> str:
    """Make the long-lived Kafka clients again (the client's certificate files changed): no
    append is lost, none is written twice (see `LogWriter.renew_producer`)."""
    # The read pool, the scanner and the mounts' indexers and writers, at their next use.
    parts.admin.kafka.clients.renew()
    producers = await parts.writers.renew_producers()
    await parts.follower.renew_consumers()
    parts.admin.renew()
    # Last: while the owners' consumer is made again no writer can confirm its slot.
    rejoined = await parts.ownership.renew()
    group = "the owners' group member" if rejoined else "the owners' group member (not yet)"
    return (
        f"{producers} write slots' producers, the state follower's consumers, the admin "
        f"client, {group}; the read pool, the scanner and the mounts' clients at their next use"
    )


def _hand_parts(app: web.Application, parts: Parts) -> None:
    """The parts the handlers and middlewares use, under their keys."""
    app[PARTS] = parts
    app[METRICS] = parts.metrics
    app[ADMIN] = parts.admin
    app[BUCKETS] = parts.buckets
    app[STREAMS] = parts.streams
    app[SNAPSHOTS] = parts.snapshots
    app[MOUNTS] = parts.mounts
    app[MOUNTED] = parts.mounted
    app[COORDINATOR] = parts.coordinator
    app[PEERS] = parts.peers
    app[UNANSWERED] = parts.unanswered
    app[FANOUT] = parts.fanout
    app[health.READINESS] = parts.readiness
    parts.readiness.set(health.SERVING, True, "accepting requests")


def add_routes(
    app: web.Application, settings: Settings, parts: Parts, table: Table | None = None
) -> None:
    """The routes of `table` (by default every route the settings serve, `http/routes.py`)."""
    # The console's seeker asks Kafka for positions.
    seeker = Seeker(parts.reader, parts.streams.reads)
    console.install(app, settings.console, seeker, settings.console_max_last)
    install(app, routes.table(settings.console) if table is None else table)
    app[openapi.REFUSED] = refused_from_outside(app[CONNECTION_LIMITS].peer_key)
    fanout = app[FANOUT]

    async def end_sse(_app: web.Application) -> None:
        fanout.end_sessions()  # the SSE sessions parked on streams end first at a stop

    app.on_shutdown.append(end_sse)


async def checkpoint_forever(follower: MetaFollower, every_s: float) -> None:
    """Save the catalog's file with the follower's positions every `every_s`."""
    while True:
        await asyncio.sleep(every_s)
        try:
            await follower.checkpoint_gently()
        except sqlite3.Error as error:  # the file is an index: the next start can rebuild it
            logging.getLogger(__name__).warning("saving the catalog's checkpoint: %s", error)


@dataclass(frozen=True)
class _Checkpoint:
    """Saves the catalog's file with the follower's positions when it closes, so the next
    start resumes there."""

    follower: MetaFollower

    def close(self) -> None:
        try:
            self.follower.checkpoint()
        except sqlite3.Error as error:  # the file is an index: the next start can rebuild it
            logging.getLogger(__name__).warning("saving the catalog's checkpoint: %s", error)


@web.middleware
def readiness_gate(request: web.Request, handler: Handler) -> Awaitable[web.StreamResponse]:
    """Streams are served only once the catalog has been rebuilt from Kafka. Not a
    coroutine: no frame of it stays beside a long-lived request (a parked SSE session)."""
    if request.app[health.READINESS].is_ok(CATALOG) or request.path in ("/healthz", "/readyz"):
        return handler(request)
    raise ProtocolError(ErrorCode.NOT_READY, "the catalog is still being loaded from Kafka")


async def _lifecycle(app: web.Application, jwks: KeySource | None) -> AsyncIterator[None]:
    """Start the parts (the supervisor loads the state, then joins the owners' group), and
    close them in reverse at shutdown."""
    settings, parts = app[SETTINGS], app[PARTS]
    running = parts.running
    app[FATAL] = running.fatal
    report_tier(parts.readiness, parts.tiering)
    for name, part in _opened_at_build(parts):
        running.opened(name, part)
    guard = folder_guard(settings, parts)
    supervisor = Supervisor(
        parts.admin,
        parts.store,
        parts.readiness,
        partial(load_state, settings, parts, guard),
        _durability(settings),
        folder=guard,
    )
    running.spawn(supervisor.run(), "supervisor")
    if jwks is not None:
        await running.start("JWKS refresh", jwks)
    await running.start("secret files", app[SECRET_FILES])
    yield
    await running.close()


async def hand_over(app: web.Application) -> None:
    """A clean stop's first step, before the listener closes: live reads parked here end now
    (a long-poll answers its 204, an SSE session ends: their clients come back through another
    instance), and this instance leaves the owners' group, so its slots move to the others
    at once (in-flight commits finish first) rather than after the drain, and none is given
    to it while it drains. Requests still arriving are served, their writes forwarded. It
    removes no other owner from the group any more (`DeadOwners.close`): when a whole
    deployment stops, the owners its forwards find gone are stopping too, and an eviction
    under way would hold its exit back."""
    parts = app[PARTS]
    parts.hub.stop()
    parts.fanout.end_sessions()
    await parts.dead_owners.close()
    await parts.ownership.close()


def _opened_at_build(parts: Parts) -> list[tuple[str, Part]]:
    """The parts that hold clients, threads, files or tasks from their construction, in the
    order they close last first: the catalog's file closes last, after everything that writes
    it; the slot writers first (after the slot ownership started later), so in-flight commits
    finish while everything they use is open."""
    mounted = parts.mounted
    # Tracing closes last: the spans of everything closed before it are still exported.
    tracing: list[tuple[str, Part]] = [] if parts.tracing is None else [("tracing", parts.tracing)]
    return [
        *tracing,
        ("catalog", parts.catalog),
        ("partition scanner", parts.scanner),
        ("covered offsets", parts.covered),
        ("data tails", parts.tails),
        ("data wakeups", parts.wakeups),  # after its task (a background task) ends
        ("log reader", parts.reader),
        ("mount transactions", mounted.transactions),
        ("sparse reader", mounted.sparse_reader),
        ("mount writer", mounted.writer),
        ("mount indexes", mounted.indexes),
        ("meta follower", parts.follower),
        ("catalog checkpoint", _Checkpoint(parts.follower)),  # the next start resumes there
        ("peer clients", parts.peers),
        ("dead owners", parts.dead_owners),  # its checks use the clients
        ("access relay", parts.relay),  # its tellings use the clients closed after it
        ("SSE fan-out", parts.fanout),  # its deliveries read through the readers
        ("background tasks", parts.running.tasks),
        ("slot writers", parts.writers),
    ]


async def load_state(settings: Settings, parts: Parts, guard: FolderGuard | None) -> int:
    """Replay the state topics, start the background work on them, then join the owners'
    group (slots arrive from there on); how many records were replayed."""
    running = parts.running
    if guard is not None:  # before joining the owners' group: see shared_folder.py
        await guard.refuse_strangers()
    began = time.monotonic()
    count = await parts.follower.replay()
    replayed = time.monotonic()
    await settle_format_level(parts)  # before any write: see state/format_gate.py
    parts.mounts.load_configured()  # and index every mount
    running.spawn(parts.follower.follow(), "follower")
    await parts.follower.measure(parts.streams.native.view)  # ready as current as can be told
    logging.getLogger(__name__).info(
        "state replayed in %.1f s, then followed in %.1f s",
        replayed - began,
        time.monotonic() - replayed,
    )
    running.spawn(parts.follower.keep_current(parts.streams.native.view), "view-currency")
    running.spawn(parts.collector.run(), "snapshot-collector")
    grace_ms = settings.expired_gc_grace_ms
    running.spawn(sweep_forever(parts.streams, grace_ms), "soft-delete-collector")
    running.spawn(parts.tiering.run(), "tier-worker")
    running.spawn(parts.tier_collector.run(), "tier-collector")
    running.spawn(parts.wakeups.run(), "data-wakeups")
    running.spawn(parts.age_retention.run(), "age-retention")
    running.spawn(parts.checkpoints.run(), "slot-checkpoints")
    if settings.catalog_checkpoint_ms:
        every_s = settings.catalog_checkpoint_ms / 1000
        running.spawn(checkpoint_forever(parts.follower, every_s), "catalog-checkpoint")
    # Its close hands every slot over (in-flight commits finish first), before the writers'.
    await running.start("slot ownership", parts.ownership)
    running.spawn(parts.reach.run(), "advertised-reach")  # may step aside from the group
    running.spawn(parts.orphaned_slots.run(), "orphaned-slots")  # may rejoin the group
    return count


async def settle_format_level(parts: Parts) -> None:
    """Decide the record format level this instance writes, once the meta topic is replayed.

    A deployment whose meta topic showed nothing is fresh, unless a member of the owners' group
    predates format levels (or the group cannot be described: taken to hold one)."""
    fresh = not FORMAT_GATE.known and not parts.catalog.bucket_ids()
    if fresh:
        ownership = parts.ownership
        try:
            members = await asyncio.to_thread(
                describe, ownership.kafka, ownership.group, ownership.timeout_s
            )
            ownership.described = members  # its start checks our instance id with it
        except (KafkaException, TopologyError) as error:
            logging.getLogger(__name__).warning(
                "cannot tell which format levels the owners' group reads: %s", error
            )
            members = None
        fresh = members is not None and all(
            member_reads(member.client_id) >= NEWEST_LEVEL
            for member in members
            if member.group_instance_id != ownership.instance_id
        )
    level = FORMAT_GATE.settle(fresh)
    logging.getLogger(__name__).info(
        "writing state records at format level %d (newest read: %d)", level, NEWEST_LEVEL
    )


def _durability(settings: Settings) -> Durability:
    return Durability(
        settings.replication_factor,
        settings.min_insync_replicas,
        settings.kafka_timeout_ms,
        settings.require_durable_topics,
        settings.allow_unreplicated,
    )


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
