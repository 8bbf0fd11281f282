"""The cold tier in one run: catch-up from cold vs hot, and append p99 while tiering runs vs idle.

One big octet stream (1 GiB under `make bench`, 16 MiB under `--smoke`; 256 KiB appends, one
partition) on an in-process adapter (hot tail off, so hot reads come from Kafka; the tier
worker runs only when told):

1. **hot**: the stream read from `-1` to its tail (1 MiB reads) while it is all in Kafka;
2. **append p99 idle**: sequential 1 KiB appends to a small stream of the same partition;
3. **append p99 while tiering**: the same appends while the tier worker moves the big stream
   to chunks and frees Kafka (until it has tiered past the big stream's end);
4. **cold**: the big stream read from `-1` again, every block fetched from the store (ranged
   GETs), then **cold cached** (from the chunk cache; only when the stream fits the 256 MiB
   cache the bench gives it).

    .venv/bin/python -m bench.tier_catchup --bootstrap-servers 127.0.0.1:9092 [--tier-mib 256]
        [--tier-s3-endpoint http://127.0.0.1:9000] [--smoke]

`make bench` runs it too (`--no-tier` skips it). The appends and the server share one process
and one event loop, as the tier worker and the server do in production: the ratio says what
tiering costs appends on the same instance. JSON on stdout; figures in docs/performance.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from typing import Any

import aiohttp
from aiohttp import web

from adapter.app import PARTS, create_app
from adapter.config import Settings
from adapter.tier.manifest import Place
from devstack.process import free_port

MIB = 2**20
BODY_BYTES = 256 * 1024
PROBE_BYTES = 1024
CACHE_CAP = 256 * MIB
OCTETS = {"Content-Type": "application/octet-stream"}


class BenchError(RuntimeError):
    """The server answered something else than the stream that was written."""


async def _append_all(session: aiohttp.ClientSession, url: str, total: int) -> None:
    body = bytes(range(256)) * (BODY_BYTES // 256)
    for _ in range(total // BODY_BYTES):
        async with session.post(url, data=body, headers=OCTETS) as reply:
            if reply.status != 204:
                raise BenchError(f"append answered {reply.status}: {await reply.text()}")


async def _catch_up(session: aiohttp.ClientSession, url: str) -> tuple[int, float]:
    """(bytes, seconds) of reading the stream from -1 to its tail."""
    offset, size, started = "-1", 0, time.perf_counter()
    while True:
        async with session.get(url, params={"offset": offset}) as reply:
            if reply.status != 200:
                raise BenchError(f"read answered {reply.status}: {await reply.text()}")
            size += len(await reply.read())
            offset = reply.headers["Stream-Next-Offset"]
            if reply.headers.get("Stream-Up-To-Date") == "true":
                return size, time.perf_counter() - started


async def _probe(
    session: aiohttp.ClientSession, url: str, count: int, until: asyncio.Task[None] | None = None
) -> list[float]:
    """Latencies (ms) of sequential appends: `count` of them, or with `until`, as many as
    happen before that task ends (at least one)."""
    body = b"p" * PROBE_BYTES
    latencies: list[float] = []
    while (len(latencies) < count) if until is None else (not until.done() or not latencies):
        started = time.perf_counter()
        async with session.post(url, data=body, headers=OCTETS) as reply:
            if reply.status != 204:
                raise BenchError(f"probe append answered {reply.status}")
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies


def _p(latencies: list[float], share: float) -> float:
    ordered = sorted(latencies)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def run_app(settings: Settings, total: int, probes: int) -> dict[str, Any]:
    app = create_app(settings)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, settings.host, settings.port).start()
    base = f"http://{settings.listen}"
    timeout = aiohttp.ClientTimeout(total=None, sock_read=300)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session:
            for _ in range(600):
                async with session.get(f"{base}/readyz") as ready:
                    if ready.status == 200:
                        break
                await asyncio.sleep(0.1)
            for path in ("/bench", "/bench/big", "/bench/probe"):
                async with session.put(f"{base}{path}", headers=OCTETS) as created:
                    if created.status != 201:
                        raise BenchError(f"PUT {path}: {created.status}")
            big, probe = f"{base}/bench/big", f"{base}/bench/probe"
            await _append_all(session, big, total)
            hot = await _catch_up(session, big)
            idle = await _probe(session, probe, probes)

            parts = app[PARTS]
            bucket = parts.catalog.bucket("bench")
            if bucket is None:
                raise BenchError("the bench bucket is not in the catalog")
            place = Place(bucket.topic, bucket.created_at_ms, 0)
            head = parts.catalog.stream("bench", "big")
            end = head.next_offset if head is not None else 0

            async def tier_big() -> None:
                while (parts.catalog.tier.tiered_to(place) or 0) < end:
                    await parts.tiering.tier_once()

            started = time.perf_counter()
            tiering = asyncio.create_task(tier_big())
            busy = await _probe(session, probe, 0, until=tiering)
            await tiering
            tiering_s = time.perf_counter() - started
            cold = await _catch_up(session, big)
            cached = await _catch_up(session, big) if total <= CACHE_CAP - MIB else None
            fetched = parts.store.fetched
    finally:
        await runner.cleanup()
    if cold[0] != hot[0]:
        raise BenchError(f"cold read {cold[0]} bytes, hot {hot[0]}")
    reads = {"hot": hot, "cold": cold} | ({"cold_cached": cached} if cached else {})
    mbps = {name: size / seconds / MIB for name, (size, seconds) in reads.items()}
    appends = {
        name: {"count": len(ms), "p50_ms": statistics.median(ms), "p99_ms": _p(ms, 0.99)}
        for name, ms in {"idle": idle, "tiering": busy}.items()
    }
    return {
        "bytes": hot[0],
        "backend": settings.cold_backend,
        "tiering_s": round(tiering_s, 2),
        "store_gets": fetched.gets,
        "mb_per_s": {name: round(value, 1) for name, value in mbps.items()},
        "appends": appends,
        "ratios": {
            "cold_vs_hot_mb_per_s": round(mbps["cold"] / mbps["hot"], 2),
            "cold_cached_vs_hot_mb_per_s": (
                round(mbps["cold_cached"] / mbps["hot"], 2) if "cold_cached" in mbps else None
            ),
            "append_p99_tiering_vs_idle": round(
                appends["tiering"]["p99_ms"] / appends["idle"]["p99_ms"], 2
            ),
        },
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--tier-mib", type=int, default=1024, help="size of the tiered stream")
    add("--tier-probes", type=int, default=500, help="appends timed while idle")
    add("--tier-s3-endpoint", default="", help="MinIO/S3 URL; default: a local folder")
    add("--tier-s3-key", default="minioadmin")
    add("--tier-s3-secret", default="minioadmin")


def run(args: argparse.Namespace, tag: str) -> dict[str, Any]:
    """The whole bench on a fresh topic prefix of the broker at `args.bootstrap_servers`."""
    total = (16 if args.smoke else args.tier_mib) * MIB
    probes = 50 if args.smoke else args.tier_probes
    with tempfile.TemporaryDirectory(prefix="tier-bench-") as cold_dir:
        settings = Settings(
            listen=f"127.0.0.1:{free_port()}",
            bootstrap_servers=args.bootstrap_servers,
            topic_prefix=f"bench.tier.{tag}.",
            partitions=1,
            hot_cache_bytes=0,
            tier_after_bytes=0,
            tier_after_ms=0,
            tier_interval_ms=3_600_000,  # the bench runs the passes itself
            tier_cache_bytes=CACHE_CAP,
            cold_dir=cold_dir,
        )
        if args.tier_s3_endpoint:
            settings = replace(
                settings,
                cold_backend="s3",
                s3_bucket=f"tier-bench-{uuid.uuid4().hex[:8]}",
                s3_endpoint_url=args.tier_s3_endpoint,
                s3_access_key_id=args.tier_s3_key,
                s3_secret_access_key=args.tier_s3_secret,
            )
        return asyncio.run(run_app(settings, total, probes))


def table(result: dict[str, Any]) -> str:
    mbps, appends, ratios = result["mb_per_s"], result["appends"], result["ratios"]
    cached = mbps.get("cold_cached")
    lines = [
        f"cold tier: {result['bytes'] / MIB:g} MiB stream, {result['backend']} backend, "
        f"tiered in {result['tiering_s']} s",
        "| hot MB/s | cold MB/s | cold cached MB/s | cold / hot | "
        "append p99 idle ms | append p99 tiering ms | tiering / idle |",
        "|---|---|---|---|---|---|---|",
        f"| {mbps['hot']} | {mbps['cold']} | {cached if cached is not None else '-'} | "
        f"{ratios['cold_vs_hot_mb_per_s']} | {appends['idle']['p99_ms']:.1f} | "
        f"{appends['tiering']['p99_ms']:.1f} | {ratios['append_p99_tiering_vs_idle']} |",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.tier_catchup",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--smoke", action="store_true", help="a 16 MiB stream, 50 probes")
    args = parser.parse_args(argv)
    result = run(args, uuid.uuid4().hex[:8])
    print(table(result), file=sys.stderr)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
