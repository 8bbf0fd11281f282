"""What one idle connection and one idle SSE session hold in the server, by tracemalloc.

The adapter runs in this process (tracemalloc on), its clients in a child process of their
own, so every byte counted is the server's. For each kind, `count` clients are opened and
held; the traced memory that appeared meanwhile, after a full collection, divided by `count`
is the cost of one, and its largest sources are printed.

    .venv/bin/python -m bench.session_memory [--bootstrap host:port] [--count 500]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import sys
import tempfile
import tracemalloc
import uuid
from collections.abc import Iterator
from pathlib import Path

import aiohttp
from aiohttp import web

from adapter.app import create_app
from adapter.config import Settings

TOP = 60

# The child: opens `count` connections, sends each `request` (if any) and reads its status
# line, says "held", then holds them until its stdin closes.
_CLIENT = r"""
import socket, sys
port, count, request = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3].encode()
held = []
for _ in range(count):
    s = socket.create_connection(("127.0.0.1", port))
    if request:
        s.sendall(request.replace(b"|", b"\r\n"))
        line = b""
        while not line.endswith(b"\r\n"):
            line += s.recv(1)
        assert b" 200 " in line, line
    held.append(s)
print("held", flush=True)
sys.stdin.read()
"""


def _settings(bootstrap: str, home: Path) -> Settings:
    return Settings(
        bootstrap_servers=bootstrap,
        topic_prefix=f"m{uuid.uuid4().hex[:10]}.",
        partitions=1,
        cold_dir=str(home / "cold"),
        mount_index_dir=str(home / "mount-index"),
        catalog_dir=str(home / "catalog"),
    )


async def _ready(url: str) -> None:
    async with aiohttp.ClientSession() as session:
        for _ in range(1200):
            async with session.get(f"{url}/readyz") as response:
                if response.status == 200:
                    break
            await asyncio.sleep(0.1)
        for path in ("/memory", "/memory/text"):
            async with session.put(f"{url}{path}", headers={"Content-Type": "text/plain"}) as r:
                assert r.status == 201, (path, r.status, await r.text())


async def _held(port: int, count: int, request: str) -> tuple[int, list[str]]:
    """The traced bytes `count` held clients add, and their largest sources."""
    gc.collect()
    before = tracemalloc.take_snapshot()
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _CLIENT,
        str(port),
        str(count),
        request,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert child.stdout is not None
    assert child.stdin is not None
    assert (await child.stdout.readline()).strip() == b"held"
    await asyncio.sleep(1.0)  # every session parked
    gc.collect()
    after = tracemalloc.take_snapshot()
    child.stdin.close()
    await child.wait()
    await asyncio.sleep(1.0)
    stats = after.compare_to(before, "lineno")
    grown = sum(stat.size_diff for stat in stats)
    top = [
        f"  {stat.size_diff / count:8.0f} B  {stat.count_diff / count:5.1f} blocks  "
        f"{stat.traceback[0].filename.rsplit('site-packages/', 1)[-1]}:{stat.traceback[0].lineno}"
        for stat in stats[:TOP]
    ]
    return grown, top


async def measure(bootstrap: str, count: int) -> None:
    with tempfile.TemporaryDirectory(prefix="session-memory-") as home:
        runner = web.AppRunner(create_app(_settings(bootstrap, Path(home))))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        try:
            await _ready(f"http://127.0.0.1:{port}")
            tracemalloc.start(1)
            sse = "GET /memory/text?offset=now&live=sse HTTP/1.1|Host: localhost||"
            for kind, request in (("idle connection", ""), ("idle SSE session", sse)):
                grown, top = await _held(port, count, request)
                print(f"{kind}: {grown / count:.0f} B each ({count} held)")
                print("\n".join(top))
        finally:
            await runner.cleanup()


@contextlib.contextmanager
def _broker(given: str | None) -> Iterator[str]:
    if given:
        yield given
        return
    from tests.services import kafka_broker

    with (
        tempfile.TemporaryDirectory(prefix="session-memory-kafka-") as home,
        kafka_broker(Path(home)) as bootstrap,
    ):
        yield bootstrap


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="a Kafka broker to use (default: one of its own)")
    parser.add_argument("--count", type=int, default=500)
    args = parser.parse_args()
    with _broker(args.bootstrap) as bootstrap:
        asyncio.run(measure(bootstrap, args.count))


if __name__ == "__main__":
    main()
