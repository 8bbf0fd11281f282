"""The `durable-kafka` console script."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import faulthandler
import gc
import json
import logging
import os
import signal
import socket
import ssl
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import uvloop
from aiohttp import web

from adapter import log_output, request_lines, upgrade
from adapter.acl_plan import ACL_FORMATS, DEFAULT_NAMESPACE, DEFAULT_USER, print_acls
from adapter.app import FATAL, PARTS, SECRET_FILES, create_app, hand_over
from adapter.auth.static_tokens import MIN_TOKEN_CHARS, digest, new_token
from adapter.config import CONFIG_ENV, ConfigError, EventLoop, Settings, load
from adapter.config import setting_names as names
from adapter.declared import declarations
from adapter.faults_for_tests import NO_FAULTS, PlantedFaults
from adapter.http import health
from adapter.http.accepting import AcceptingSite
from adapter.http.connections import CONNECTION_LIMITS, listen_backlog
from adapter.http.ops_listener import create_ops_app
from adapter.http.server import ProtocolRunner
from adapter.http.tls import reload, reload_client_ca, server_context
from adapter.log.errors import LogUnavailable
from adapter.log.scanner import PartitionScanner
from adapter.parts import configured_mounts, kafka_access
from adapter.readiness import Readiness
from adapter.secret_files import SecretFiles
from adapter.service.tier_stats import tier_stats
from adapter.state.catalog import Catalog
from adapter.state.follower import MetaFollower
from adapter.topic_plan import DEFAULT_STRIMZI_CLUSTER, FORMATS, print_plan
from adapter.workers import CONFIG_ERROR, Listeners, WorkerPool
from topology.errors import BrokerUnavailable
from topology.naming import StateTopics

log = logging.getLogger("durable-kafka")


def build_parser(settings_type: type[Settings] = Settings) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="durable-kafka",
        description="The Durable Streams HTTP protocol, with every byte kept in Apache Kafka.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        "serve",
        help="serve the HTTP API",
        description="Settings: defaults < TOML file < DURABLE_KAFKA_* environment < these flags.",
    )
    stats = commands.add_parser(
        "tier-stats",
        help="per bucket partition: Kafka's log start, the tiered point, hot and cold bytes",
        description="One JSON object per bucket partition, from the state topics and the "
        "bucket topics (reads each partition's part still in Kafka). Takes the serve settings.",
    )
    topics = commands.add_parser("topics", help="the Kafka topics the server needs")
    plan = topics.add_subparsers(dest="topics_command", required=True).add_parser(
        "plan",
        help="print the topics to create when topic_management is external",
        description="The internal topics and each named bucket's data topic, as the server "
        "creates them in auto mode. Takes the serve settings; auto replication asks the "
        "cluster for its broker count.",
    )
    plan.add_argument(
        "--bucket", action="append", default=[], metavar="NAME", help="a bucket's topic too"
    )
    plan.add_argument("--format", choices=FORMATS, default="kafka-topics", dest="plan_format")
    plan.add_argument(
        "--strimzi-cluster",
        default=DEFAULT_STRIMZI_CLUSTER,
        metavar="NAME",
        help="the strimzi.io/cluster label of each KafkaTopic",
    )
    acls = _acls_parser(commands)
    upgrade = commands.add_parser(
        "upgrade", help="record format levels during a rolling upgrade"
    ).add_subparsers(dest="upgrade_command", required=True)
    status = upgrade.add_parser(
        "status",
        help="each instance, the format level it reads and writes, and the level in force",
        description="Reads the meta topic and describes the owners' group. Takes the serve "
        "settings.",
    )
    status.add_argument("--json", action="store_true", help="one JSON object")
    finalize = upgrade.add_parser(
        "finalize",
        help="switch the newest record format level on, once every instance reads it",
        description="Refused (exit 1) while a member of the owners' group does not read the "
        "newest level. There is no way back: older versions cannot read what follows.",
    )
    finalize.set_defaults(json=False)
    for command in (serve, stats, plan, acls, status, finalize):
        _settings_arguments(command, settings_type)
    hash_token = commands.add_parser(
        "hash-token",
        help="print the sha256 of a bearer token for an auth_token_file",
        description="Reads the token from standard input (so it stays out of shell history).",
    )
    hash_token.add_argument(
        "--new", action="store_true", help="make a new random token and print it with its hash"
    )
    return parser


def _acls_parser(commands: Any) -> argparse.ArgumentParser:
    acls = commands.add_parser("acls", help="the Kafka ACLs the server needs")
    plan: argparse.ArgumentParser = acls.add_subparsers(
        dest="acls_command", required=True
    ).add_parser(
        "plan",
        help="print the ACLs to grant the server's principal (and a Spark reader's)",
        description="Exactly what the settings need: Delete on bucket topics only, Create only "
        "with topic_management auto, Read on mounted topics. Takes the serve settings; asks "
        "no cluster.",
    )
    plan.add_argument("--format", choices=ACL_FORMATS, default="kafka-acls", dest="acls_format")
    plan.add_argument("--user", default=DEFAULT_USER, help="the server's principal (User:NAME)")
    plan.add_argument("--spark-user", metavar="NAME", help="also a Spark reader's grants")
    plan.add_argument(
        "--strimzi-cluster",
        default=DEFAULT_STRIMZI_CLUSTER,
        metavar="NAME",
        help="the strimzi.io/cluster label of each KafkaUser",
    )
    plan.add_argument("--namespace", default=DEFAULT_NAMESPACE, help="each KafkaUser's namespace")
    return plan


def _settings_arguments(command: argparse.ArgumentParser, settings_type: type[Settings]) -> None:
    """A flag per declared setting, with its default and environment variable."""
    command.add_argument("--config", metavar="FILE", help=f"TOML settings file (or ${CONFIG_ENV})")
    for setting in declarations(settings_type):
        auto = setting.declared.auto
        default = "auto" if auto is not None and setting.default == auto else repr(setting.default)
        command.add_argument(
            setting.flag,
            dest=setting.name,
            metavar=setting.name.split("_")[-1].upper(),
            help=f"default {default}; env {setting.env}",
        )


def main(argv: list[str] | None = None, faults: PlantedFaults = NO_FAULTS) -> int:
    """The console script; `faults`: planted by the test suites only (tests/faulty_adapter.py)."""
    args = build_parser().parse_args(argv)
    if args.command == "hash-token":
        return _hash_token(args.new)
    flags = {name: value for name in names() if (value := getattr(args, name)) is not None}
    try:
        settings = load(args.config, os.environ, flags)
        configured_mounts(settings)
        if args.command == "serve":
            server_context(settings)  # the TLS files: a bad one stops here, before any worker
    except ConfigError as error:
        print(f"durable-kafka: configuration error: {error}", file=sys.stderr)
        return 2
    log_output.setup(settings.log_level, settings.log_format)
    if args.command == "tier-stats":
        return asyncio.run(print_tier_stats(settings))
    if args.command == "acls":
        return print_acls(
            settings,
            args.acls_format,
            args.user,
            args.spark_user,
            args.strimzi_cluster,
            args.namespace,
        )
    if args.command == "topics":
        return asyncio.run(
            print_plan(settings, args.bucket, args.plan_format, args.strimzi_cluster)
        )
    if args.command == "upgrade":
        return asyncio.run(upgrade.run(settings, args.upgrade_command, args.json))
    if settings.worker_count > 1:
        return WorkerPool(settings, partial(run_server, faults=faults)).run()
    return run_server(settings, Listeners(), faults)


def run_server(settings: Settings, listeners: Listeners, faults: PlantedFaults = NO_FAULTS) -> int:
    """Serve in this process (the only one, or one of `--workers`) until told to stop."""
    # A crash inside a native library (librdkafka asserts) ends in SIGABRT: write every
    # thread's Python stack to stderr first, which names the call that was under way.
    faulthandler.enable(all_threads=True)
    tune_gc()
    try:
        with asyncio.Runner(loop_factory=loop_factory(settings.event_loop)) as runner:
            code = runner.run(serve(settings, listeners, faults))
            served = time.monotonic()
        log.info("event loop closed in %.1f s", time.monotonic() - served)
        return code
    except ConfigError as error:  # a token or key file named by the settings is unusable
        print(f"durable-kafka: configuration error: {error}", file=sys.stderr)
        return CONFIG_ERROR
    finally:
        # A worker process ends in os._exit, which runs no atexit hook: write the last lines.
        request_lines.close()


# The cyclic garbage collector's thresholds while serving (Python's default: 700, 10, 10).
# Requests in flight keep a few hundred objects alive at any moment, so at 700 the young
# generation was collected every few requests: ~7 % of the process's CPU under load, with
# full collections of 30+ ms (docs/performance.md). Almost everything a request makes is
# freed by reference counting; cycles are still collected, every 50,000 net allocations.
GC_THRESHOLDS = (50_000, 20, 20)


def tune_gc() -> None:
    """Collect less often, and never again look at what exists before serving (modules,
    classes, settings): `gc.freeze()` keeps it out of every later collection."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def _hash_token(new: bool) -> int:
    """`[[token]]` lines for the token file; with --new, the token too (shown once only)."""
    token = new_token() if new else sys.stdin.readline().strip()
    if len(token) < MIN_TOKEN_CHARS:
        print(f"durable-kafka: a token needs >= {MIN_TOKEN_CHARS} characters", file=sys.stderr)
        return 2
    if new:
        print(f"# the token (give it to the client; it is not stored): {token}")
    print(f'sha256 = "{digest(token)}"')
    return 0


def loop_factory(kind: EventLoop) -> Callable[[], asyncio.AbstractEventLoop]:
    """uvloop's event loop (libuv: the loop's own work in C), or the standard library's as the
    fallback. What each costs per append: docs/performance.md."""
    return uvloop.new_event_loop if kind == "uvloop" else asyncio.new_event_loop


async def print_tier_stats(settings: Settings) -> int:
    catalog = Catalog()
    topics = StateTopics.of(settings.topic_prefix)
    kafka = kafka_access(settings)
    follower = MetaFollower(kafka, topics, catalog, settings.kafka_timeout_s, lambda _key: None)
    scanner = PartitionScanner(kafka, settings.kafka_timeout_s)
    try:
        await follower.replay()
        for stats in await tier_stats(catalog, scanner):
            print(json.dumps(dataclasses.asdict(stats)))
    except (LogUnavailable, BrokerUnavailable) as error:
        print(f"durable-kafka: {error}", file=sys.stderr)
        return 1
    finally:
        await follower.close()
        await scanner.close()
    return 0


async def serve(settings: Settings, listeners: Listeners, faults: PlantedFaults = NO_FAULTS) -> int:
    """Serve until SIGINT/SIGTERM (exit 0) or until a fault an operator must fix (exit 1).

    On SIGTERM readiness drops first (`serving`), then live reads end and the write slots are
    handed to the other instances (`hand_over`), then the listener closes and in-flight
    requests get `drain_timeout_ms` to finish before the process exits.
    With HTTPS, SIGHUP reloads the certificate (`adapter/http/tls.py`).
    """
    started, stopping = time.monotonic(), None
    held: asyncio.TimerHandle | None = None
    tls = server_context(settings)
    app = create_app(settings, listeners.siblings, faults=faults)
    drain_s = settings.drain_timeout_ms / 1000
    runner = ProtocolRunner(app, access_log=None, shutdown_timeout=drain_s)
    ops_app = create_ops_app(app[PARTS].metrics, app[health.READINESS], listeners.siblings)
    ops = web.AppRunner(ops_app, access_log=None)
    await runner.setup()
    await ops.setup()
    try:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        if tls is not None:
            loop.add_signal_handler(signal.SIGHUP, reload, tls, settings)
            _watch_tls(app[SECRET_FILES], tls, settings)
        stopped = asyncio.create_task(stop.wait())
        waiters: list[asyncio.Future[Any]] = [stopped, app[FATAL]]
        # A worker's own listeners, for writes forwarded to it: its TCP port (other instances,
        # over the network: HTTPS as `listen` is) and its Unix socket (its siblings).
        if listeners.forward is not None:
            await _own_site(runner, listeners.forward, settings, tls).start()
        if listeners.unix is not None:
            await web.SockSite(runner, listeners.unix).start()
        if settings.ops_address is not None:
            await _bind(web.TCPSite(ops, *settings.ops_address), "ops_listen", settings.ops_listen)
            log.info("ops listener on %s", _urls(ops))
        if listeners.reuse_port:
            # A worker shares the port once ready: while it replays (at start, or restarted
            # after a crash) the kernel gives new connections to its ready siblings rather
            # than to a worker that could only answer 503 `not_ready`.
            await _until_ready(app[health.READINESS], waiters)
            log.info("ready %.1f s after start", time.monotonic() - started)
        if not any(waiter.done() for waiter in waiters):
            reuse_port = listeners.reuse_port or None
            site = _shared_site(runner, settings, tls, reuse_port)
            await _bind(site, "listen", settings.listen)
            log.info(
                "serving on %s://%s (kafka %s, %s event loop)",
                settings.scheme,
                settings.listen,
                settings.bootstrap_servers,
                settings.event_loop,
            )
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if app[FATAL].done():
            log.error("stopping: %s", app[FATAL].result())
            return 1
        app[health.READINESS].set(health.SERVING, False, "stopping: draining requests")
        log.info("stopping: handing the write slots over")
        stopping = time.monotonic()
        await hand_over(app)
        took = time.monotonic() - stopping
        log.info(
            "stopping: slots handed over in %.1f s; draining requests for up to %.1f s",
            took,
            drain_s,
        )
        # Just before the drain cuts them off: what the requests still in flight wait on.
        held = asyncio.get_running_loop().call_later(max(0.0, drain_s - 0.1), log_held_requests)
        return 0
    finally:
        await runner.cleanup()
        if held is not None:
            held.cancel()
        await ops.cleanup()
        if stopping is not None:
            log.info("stopped %.1f s after the signal", time.monotonic() - stopping)


def log_held_requests() -> None:
    """Log, for each request handler still running, the chain of awaits it is suspended in
    (outermost first): what holds a drain to its end."""
    for task in asyncio.all_tasks():
        chain = awaits(task.get_coro())
        if any(where.startswith("_handle_request ") for where in chain):
            log.warning("a request held to the drain's end waits in: %s", " > ".join(chain))


def awaits(coro: object) -> list[str]:
    """`function file:line` of each coroutine in the chain `coro` awaits, outermost first."""
    chain: list[str] = []
    while coro is not None and (frame := getattr(coro, "cr_frame", None)) is not None:
        code = frame.f_code
        chain.append(f"{code.co_name} {code.co_filename.rsplit('/', 1)[-1]}:{frame.f_lineno}")
        coro = getattr(coro, "cr_await", None)
    return chain


def _watch_tls(files: SecretFiles, tls: ssl.SSLContext, settings: Settings) -> None:
    """The listeners' certificate, key and client CA files, reloaded when they change."""
    pair = [settings.tls_cert_file, settings.tls_key_file]
    files.watch("tls_cert_file and tls_key_file", pair, partial(reload, tls, settings))
    ca = [settings.tls_client_ca_file]
    files.watch("tls_client_ca_file", ca, partial(reload_client_ca, tls, settings))


async def _bind(site: web.BaseSite, setting: str, address: str) -> None:
    """Start listening on `address`: one it cannot bind (another process listens there, or
    the host is not this machine's) stops the start as a configuration error naming the
    setting, which is the operator's to change, rather than a traceback."""
    try:
        await site.start()
    except OSError as error:
        reason = os.strerror(error.errno) if error.errno else str(error)
        raise ConfigError(f"{setting} {address}: cannot listen there: {reason}") from None


def _shared_site(
    runner: web.AppRunner, settings: Settings, tls: ssl.SSLContext | None, reuse_port: bool | None
) -> AcceptingSite:
    """The `listen` address's site: over HTTPS, handshakes within `header_timeout_ms`; a
    backlog as deep as the connections it admits."""
    return AcceptingSite(
        runner,
        address=(settings.host, settings.port),
        backlog=listen_backlog(runner.app[CONNECTION_LIMITS].max_connections),
        reuse_port=bool(reuse_port),
        tls=tls,
        handshake_timeout_s=settings.header_timeout_ms / 1000,
    )


def _own_site(
    runner: web.AppRunner, sock: socket.socket, settings: Settings, tls: ssl.SSLContext | None
) -> AcceptingSite:
    """A worker's own TCP port: HTTPS as `listen` is."""
    return AcceptingSite(
        runner, sock=sock, tls=tls, handshake_timeout_s=settings.header_timeout_ms / 1000
    )


async def _until_ready(readiness: Readiness, waiters: list[asyncio.Future[Any]]) -> None:
    """Return once `readiness` says ready, or once one of `waiters` is done (stop, or a
    fault): readiness changes without an event, so it is looked at every 50 ms."""
    while not readiness.ready and not any(waiter.done() for waiter in waiters):
        await asyncio.wait(waiters, timeout=0.05)


def _urls(runner: web.AppRunner) -> str:
    return ", ".join(f"http://{host}:{port}" for host, port, *_ in runner.addresses)


if __name__ == "__main__":
    sys.exit(main())
