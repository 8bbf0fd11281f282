"""The `durable-kafka` console script."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from typing import Any

from aiohttp import web

from adapter import logs
from adapter.app import FATAL, PARTS, create_app
from adapter.config import CONFIG_ENV, ConfigError, Settings, env_name, flag_name, load
from adapter.config import setting_names as names
from adapter.http import health
from adapter.http.ops import create_ops_app
from adapter.http.server import ProtocolRunner

log = logging.getLogger("durable-kafka")


def build_parser() -> argparse.ArgumentParser:
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
    serve.add_argument("--config", metavar="FILE", help=f"TOML settings file (or ${CONFIG_ENV})")
    defaults = Settings()
    for name in names():
        serve.add_argument(
            flag_name(name),
            dest=name,
            metavar=name.split("_")[-1].upper(),
            help=f"default {getattr(defaults, name)!r}; env {env_name(name)}",
        )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    flags = {name: value for name in names() if (value := getattr(args, name)) is not None}
    try:
        settings = load(args.config, os.environ, flags)
    except ConfigError as error:
        print(f"durable-kafka: configuration error: {error}", file=sys.stderr)
        return 2
    logs.setup(settings.log_level, settings.log_format)
    return asyncio.run(serve(settings))


async def serve(settings: Settings) -> int:
    """Serve until SIGINT/SIGTERM (exit 0) or until a fault an operator must fix (exit 1).

    On SIGTERM readiness drops first (`serving`), then the listener closes, SSE responses
    end and in-flight requests get `drain_timeout_ms` to finish before the process exits.
    """
    app = create_app(settings)
    drain_s = settings.drain_timeout_ms / 1000
    runner = ProtocolRunner(app, access_log=None, shutdown_timeout=drain_s)
    ops = web.AppRunner(create_ops_app(app[PARTS].metrics, app[health.READINESS]), access_log=None)
    await runner.setup()
    await ops.setup()
    try:
        await web.TCPSite(runner, settings.host, settings.port).start()
        log.info("serving on http://%s (kafka %s)", settings.listen, settings.bootstrap_servers)
        if settings.ops_address is not None:
            await web.TCPSite(ops, *settings.ops_address).start()
            log.info("ops listener on %s", _urls(ops))
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        stopped = asyncio.create_task(stop.wait())
        waiters: list[asyncio.Future[Any]] = [stopped, app[FATAL]]
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if app[FATAL].done():
            log.error("stopping: %s", app[FATAL].result())
            return 1
        app[health.READINESS].set(health.SERVING, False, "stopping: draining requests")
        log.info("stopping: draining requests for up to %.1f s", drain_s)
        return 0
    finally:
        await runner.cleanup()
        await ops.cleanup()


def _urls(runner: web.AppRunner) -> str:
    return ", ".join(f"http://{host}:{port}" for host, port, *_ in runner.addresses)


if __name__ == "__main__":
    sys.exit(main())
