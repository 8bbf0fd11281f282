"""Bootstrap vs catch-up on one durable-kafka server: time to first byte and MB/s, as ratios.

One stream gets a snapshot (10 MiB by default) and then 10,000 messages after it. A client
learns that state two ways, alternately, on the same stream in the same run:

- **bootstrap**: one `GET {stream}/bootstrap` (the snapshot and every message, multipart);
- **catch-up**: what a client does without it: `GET {stream}/snapshot` (307, followed) for the
  blob, then `GET {stream}?offset=...` from the snapshot offset until `Stream-Up-To-Date`.

Both count the same payload bytes (the snapshot and the messages; bootstrap's multipart framing
is not counted), so MB/s compare like for like. Time to first byte is from sending the first
request to the first byte of the first body. The client keeps nothing; it checks what it got
(sizes, and bootstrap's number of parts), so a broken answer fails the run, never a figure.

    .venv/bin/python -m bench.suite_bootstrap            # against a fresh durable-kafka
    .venv/bin/python -m bench.suite_bootstrap --smoke    # tiny sizes, one repetition

`make bench` runs it too (`--no-bootstrap` skips it). Figures: docs/performance.md.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from bench import targets

MIB = 1024 * 1024
OCTETS = {"Content-Type": "application/octet-stream"}
FILL_CONCURRENCY = 16
READ_CHUNK = 256 * 1024
WAYS = ("bootstrap", "catch-up")


class BenchError(RuntimeError):
    """The server's answer was not the stream that was written."""


@dataclass(frozen=True)
class Sizes:
    snapshot_bytes: int
    messages: int
    message_bytes: int

    @property
    def payload_bytes(self) -> int:
        return self.snapshot_bytes + self.messages * self.message_bytes


@dataclass(frozen=True)
class Timing:
    ttfb_s: float
    total_s: float
    payload_bytes: int

    def as_json(self) -> dict[str, float]:
        return {
            "ttfb_ms": self.ttfb_s * 1000,
            "total_ms": self.total_s * 1000,
            "mb_per_s": self.payload_bytes / self.total_s / 1e6,
        }


async def fill(session: aiohttp.ClientSession, stream: str, sizes: Sizes) -> str:
    """Create the stream, publish its snapshot, append the messages; the snapshot offset."""
    bucket = stream.rsplit("/", 1)[0]
    async with session.put(bucket) as reply:
        _expect(reply.status in (201, 409), f"PUT {bucket}: {reply.status}")
    async with session.put(stream, data=b"state before the snapshot", headers=OCTETS) as reply:
        _expect(reply.status == 201, f"PUT {stream}: {reply.status} {await reply.text()}")
        offset = reply.headers["Stream-Next-Offset"]
    blob = io.BytesIO(bytes(range(256)) * (sizes.snapshot_bytes // 256 + 1))
    blob.truncate(sizes.snapshot_bytes)
    async with session.put(f"{stream}/snapshot/{offset}", data=blob, headers=OCTETS) as reply:
        _expect(reply.status == 204, f"publish: {reply.status} {await reply.text()}")
    slots = asyncio.Semaphore(FILL_CONCURRENCY)
    body = b"m" * sizes.message_bytes

    async def append() -> None:
        async with slots, session.post(stream, data=body, headers=OCTETS) as reply:
            _expect(reply.status == 204, f"append: {reply.status} {await reply.text()}")

    await asyncio.gather(*(append() for _ in range(sizes.messages)))
    return offset


async def bootstrap(session: aiohttp.ClientSession, stream: str, sizes: Sizes) -> Timing:
    started = time.perf_counter()
    async with session.get(f"{stream}/bootstrap") as reply:
        _expect(reply.status == 200, f"bootstrap: {reply.status}")
        boundary = reply.headers["Content-Type"].split("boundary=", 1)[1]
        first = await reply.content.readany()
        ttfb = time.perf_counter() - started
        delimiter = f"\r\n--{boundary}".encode()
        size, delimiters, carry = len(first), 0, b"\r\n" + first
        delimiters += carry.count(delimiter)
        carry = carry[-(len(delimiter) - 1) :]
        async for chunk in reply.content.iter_chunked(READ_CHUNK):
            size += len(chunk)
            window = carry + chunk
            delimiters += window.count(delimiter)
            carry = window[-(len(delimiter) - 1) :]
    total = time.perf_counter() - started
    _expect(delimiters == sizes.messages + 2, f"bootstrap: {delimiters - 2} parts after the first")
    _expect(size > sizes.payload_bytes, f"bootstrap: {size} bytes")
    return Timing(ttfb, total, sizes.payload_bytes)


async def catch_up(session: aiohttp.ClientSession, stream: str, sizes: Sizes) -> Timing:
    started = time.perf_counter()
    async with session.get(f"{stream}/snapshot") as reply:  # 307 to the blob, followed
        _expect(reply.status == 200, f"snapshot: {reply.status}")
        offset = reply.headers["Stream-Snapshot-Offset"]
        first = await reply.content.readany()
        ttfb = time.perf_counter() - started
        size = len(first) + await _drain(reply)
    _expect(size == sizes.snapshot_bytes, f"snapshot: {size} bytes")
    messages = 0
    while True:
        async with session.get(stream, params={"offset": offset}) as reply:
            _expect(reply.status == 200, f"catch-up at {offset}: {reply.status}")
            messages += await _drain(reply)
            offset = reply.headers["Stream-Next-Offset"]
            if reply.headers.get("Stream-Up-To-Date") == "true":
                break
    total = time.perf_counter() - started
    _expect(messages == sizes.messages * sizes.message_bytes, f"catch-up: {messages} bytes")
    return Timing(ttfb, total, sizes.payload_bytes)


async def _drain(reply: aiohttp.ClientResponse) -> int:
    size = 0
    async for chunk in reply.content.iter_chunked(READ_CHUNK):
        size += len(chunk)
    return size


def _expect(condition: bool, what: str) -> None:
    if not condition:
        raise BenchError(what)


def stream_url(base: str, tag: str) -> str:
    return f"{base}/bench-boot/s-{tag}"


def _session() -> aiohttp.ClientSession:
    return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_read=120))


async def populate(base: str, sizes: Sizes, tag: str) -> float:
    """Fill the stream of `tag` on `base`; how long it took, in seconds."""
    async with _session() as session:
        started = time.perf_counter()
        await fill(session, stream_url(base, tag), sizes)
        return time.perf_counter() - started


async def compare(base: str, sizes: Sizes, reps: int, tag: str) -> dict[str, Any]:
    """Time both ways on the filled stream `reps` times each, alternating, after one round
    unmeasured; medians, ratios."""
    stream = stream_url(base, tag)
    runs: dict[str, list[dict[str, float]]] = {way: [] for way in WAYS}
    async with _session() as session:
        await bootstrap(session, stream, sizes)  # unmeasured: the server's first read makes
        await catch_up(session, stream, sizes)  # its Kafka consumers, whichever way asks first
        for _ in range(reps):
            runs["bootstrap"].append((await bootstrap(session, stream, sizes)).as_json())
            runs["catch-up"].append((await catch_up(session, stream, sizes)).as_json())
    medians = {way: _medians(reps_) for way, reps_ in runs.items()}
    boot, catch = medians["bootstrap"], medians["catch-up"]
    return {
        "sizes": sizes.__dict__,
        "reps": runs,
        "median": medians,
        "ratios": {
            "mb_per_s": boot["mb_per_s"] / catch["mb_per_s"],
            "ttfb_ms": boot["ttfb_ms"] / catch["ttfb_ms"],
        },
    }


def run(start: Callable[[], targets.Server], sizes: Sizes, reps: int, tag: str) -> dict[str, Any]:
    """Fill the stream through one server, then compare through a fresh one on the same
    topics, so that every read comes from Kafka (the filler's hot tail would serve them)."""
    server = start()
    try:
        fill_s = asyncio.run(populate(server.url, sizes, tag))
    finally:
        targets.stop(server)
    server = start()
    try:
        return asyncio.run(compare(server.url, sizes, reps, tag)) | {"fill_s": round(fill_s, 1)}
    finally:
        targets.stop(server)


def _medians(reps: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(rep[key] for rep in reps) for key in reps[0]}


def table(result: dict[str, Any]) -> str:
    sizes = result["sizes"]
    lines = [
        f"bootstrap vs catch-up: {sizes['snapshot_bytes'] / MIB:g} MiB snapshot + "
        f"{sizes['messages']:,} messages of {sizes['message_bytes']:,} B "
        f"(medians of {len(result['reps']['bootstrap'])})",
        "| way | time to first byte ms | total ms | MB/s (payload) |",
        "|---|---|---|---|",
    ]
    for way in WAYS:
        m = result["median"][way]
        lines.append(f"| {way} | {m['ttfb_ms']:.1f} | {m['total_ms']:.0f} | {m['mb_per_s']:.1f} |")
    r = result["ratios"]
    lines.append(f"| bootstrap / catch-up | {r['ttfb_ms']:.2f} | | {r['mb_per_s']:.2f} |")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--bootstrap-snapshot-mib", type=float, default=10, help="snapshot size")
    add("--bootstrap-messages", type=int, default=10_000, help="messages after the snapshot")
    add("--bootstrap-message-bytes", type=int, default=1024, help="size of each message")


def sizes_of(args: argparse.Namespace) -> Sizes:
    if args.smoke:
        return Sizes(256 * 1024, 200, args.bootstrap_message_bytes)
    snapshot = int(args.bootstrap_snapshot_mib * MIB)
    return Sizes(snapshot, args.bootstrap_messages, args.bootstrap_message_bytes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.suite_bootstrap",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one repetition")
    parser.add_argument("--log-dir", type=Path, default=targets.REPO / "bench/results/logs")
    args = parser.parse_args(argv)
    reps = 1 if args.smoke else args.reps
    tag = f"{int(time.time())}-{os.getpid()}"
    options = targets.TargetOptions(args.bootstrap_servers, f"bench.boot.{tag}.", 60_000, 0)
    log_dir = args.log_dir

    def start() -> targets.Server:
        return targets.start(targets.DURABLE_KAFKA, log_dir, options)

    result = run(start, sizes_of(args), reps, tag)
    print(table(result))
    print(json.dumps(result, indent=2), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
