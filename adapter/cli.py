"""The `durable-kafka` console script."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import os
import signal
import sys
from typing import Any

from aiohttp import web

from adapter.app import FATAL, create_app
from adapter.config import CONFIG_ENV, ConfigError, Settings, env_name, flag_name, load
from adapter.config import setting_names as names
from adapter.log.errors import LogUnavailable
from adapter.log.scanner import PartitionScanner
from adapter.service.tier_stats import tier_stats
from adapter.state.catalog import Catalog
from adapter.state.follower import MetaFollower
from topology.errors import BrokerUnavailable
from topology.naming import StateTopics

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
    stats = commands.add_parser(
        "tier-stats",
        help="per bucket partition: Kafka's log start, the tiered point, hot and cold bytes",
        description="One JSON object per bucket partition, from the state topics and the "
        "bucket topics (reads each partition's part still in Kafka). Takes the serve settings.",
    )
    for command in (serve, stats):
        _settings_arguments(command)
    return parser


def _settings_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("--config", metavar="FILE", help=f"TOML settings file (or ${CONFIG_ENV})")
    defaults = Settings()
    for name in names():
        command.add_argument(
            flag_name(name),
            dest=name,
            metavar=name.split("_")[-1].upper(),
            help=f"default {getattr(defaults, name)!r}; env {env_name(name)}",
        )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    flags = {name: value for name in names() if (value := getattr(args, name)) is not None}
    try:
        settings = load(args.config, os.environ, flags)
    except ConfigError as error:
        print(f"durable-kafka: configuration error: {error}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.command == "tier-stats":
        return asyncio.run(print_tier_stats(settings))
    return asyncio.run(serve(settings))


async def print_tier_stats(settings: Settings) -> int:
    catalog = Catalog()
    topics = StateTopics.of(settings.topic_prefix)
    follower = MetaFollower(
        settings.bootstrap_servers, topics, catalog, settings.kafka_timeout_s, lambda _key: None
    )
    scanner = PartitionScanner(settings.bootstrap_servers, settings.kafka_timeout_s)
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


async def serve(settings: Settings) -> int:
    """Serve until SIGINT/SIGTERM (exit 0) or until a fault an operator must fix (exit 1)."""
    app = create_app(settings)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, settings.host, settings.port).start()
        log.info("serving on http://%s (kafka %s)", settings.listen, settings.bootstrap_servers)
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
        return 0
    finally:
        await runner.cleanup()


if __name__ == "__main__":
    sys.exit(main())
