"""Catch-up from the cold tier vs from Kafka, in one run: the same stream read from -1 while
it is all in Kafka (hot), then after the tier worker moved it to chunks and freed Kafka (cold,
first read: every chunk fetched from the store; cold again: from the chunk cache).

    .venv/bin/python -m bench.tier_catchup --bootstrap 127.0.0.1:9092 [--mb 256] [--s3-endpoint URL]

An in-process adapter (no hot tail, so hot reads come from Kafka) on a fresh topic prefix; the
tier worker runs only when told. Prints MB/s of each read and the ratios cold / hot, as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
import uuid
from dataclasses import replace
from typing import Any

import aiohttp
from aiohttp import web

from adapter.app import PARTS, create_app
from adapter.config import Settings

BODY_BYTES = 256 * 1024


async def _append_all(session: aiohttp.ClientSession, url: str, total: int) -> None:
    body = bytes(range(256)) * (BODY_BYTES // 256)
    for _ in range(total // BODY_BYTES):
        async with session.post(
            url, data=body, headers={"Content-Type": "application/octet-stream"}
        ) as reply:
            if reply.status != 204:
                raise RuntimeError(f"append answered {reply.status}: {await reply.text()}")


async def _catch_up(session: aiohttp.ClientSession, url: str) -> tuple[int, float]:
    """(bytes, seconds) of reading the stream from -1 to its tail."""
    offset, size, started = "-1", 0, time.perf_counter()
    while True:
        async with session.get(url, params={"offset": offset}) as reply:
            if reply.status != 200:
                raise RuntimeError(f"read answered {reply.status}: {await reply.text()}")
            size += len(await reply.read())
            offset = reply.headers["Stream-Next-Offset"]
            if reply.headers.get("Stream-Up-To-Date") == "true":
                return size, time.perf_counter() - started


async def run(settings: Settings, total: int) -> dict[str, Any]:
    app = create_app(settings)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, settings.host, settings.port)
    await site.start()
    base = f"http://{settings.listen}"
    try:
        async with aiohttp.ClientSession() as session:
            for _ in range(600):
                async with session.get(f"{base}/readyz") as ready:
                    if ready.status == 200:
                        break
                await asyncio.sleep(0.1)
            assert (await session.put(f"{base}/bench")).status == 201
            url = f"{base}/bench/big"
            created = await session.put(url, headers={"Content-Type": "application/octet-stream"})
            assert created.status == 201
            await _append_all(session, url, total)
            hot = await _catch_up(session, url)
            started = time.perf_counter()
            while await app[PARTS].tiering.tier_once():
                pass
            tiering_s = time.perf_counter() - started
            cold = await _catch_up(session, url)
            cached = await _catch_up(session, url)
    finally:
        await runner.cleanup()
    figures = {name: size / seconds / 2**20 for name, (size, seconds) in
               {"hot": hot, "cold": cold, "cold_cached": cached}.items()}  # fmt: skip
    return {
        "bytes": hot[0],
        "backend": settings.cold_backend,
        "tiering_s": round(tiering_s, 2),
        "mb_per_s": {name: round(value, 1) for name, value in figures.items()},
        "ratio_cold_vs_hot": round(figures["cold"] / figures["hot"], 2),
        "ratio_cold_cached_vs_hot": round(figures["cold_cached"] / figures["hot"], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--mb", type=int, default=256)
    parser.add_argument("--listen", default="127.0.0.1:4499")
    parser.add_argument("--s3-endpoint", default="", help="MinIO/S3 URL; default: a local folder")
    parser.add_argument("--s3-key", default="minioadmin")
    parser.add_argument("--s3-secret", default="minioadmin")
    args = parser.parse_args()
    total = args.mb * 2**20
    with tempfile.TemporaryDirectory(prefix="tier-bench-") as cold_dir:
        settings = Settings(
            listen=args.listen,
            bootstrap_servers=args.bootstrap,
            topic_prefix=f"bench.tier.{uuid.uuid4().hex[:8]}.",
            partitions=1,
            hot_cache_bytes=0,
            tier_after_bytes=0,
            tier_after_ms=0,
            tier_interval_ms=3_600_000,  # the bench runs the passes itself
            tier_cache_bytes=total + 2**20,  # the second cold read is all from the cache
            cold_dir=cold_dir,
        )
        if args.s3_endpoint:
            settings = replace(
                settings,
                cold_backend="s3",
                s3_bucket=f"tier-bench-{uuid.uuid4().hex[:8]}",
                s3_endpoint_url=args.s3_endpoint,
                s3_access_key_id=args.s3_key,
                s3_secret_access_key=args.s3_secret,
            )
        print(json.dumps(asyncio.run(run(settings, total)), indent=2))


if __name__ == "__main__":
    main()
