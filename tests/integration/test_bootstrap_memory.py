"""A bootstrap streams: the adapter's resident memory stays within 64 MiB of idle while a client
reads a `/bootstrap` of a 1 GiB stream (a real adapter process, its VmRSS sampled from /proc);
so does a snapshot publish of the largest size allowed (128 MiB), streamed to the store.

The stream is filled by one adapter process and bootstrapped from a fresh one, so "idle" is
the resident size of a ready adapter that has not yet served a read, and nothing the fill
left behind (its hot tail, freed but unreturned heap) hides growth or inflates the baseline.
"""

from __future__ import annotations

import asyncio
import io
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from devstack.process import free_port
from tests.adapter_process import adapter_pid, running_adapter

MIB = 1024 * 1024
STREAM_BYTES = 1024 * MIB
APPEND_BYTES = 4 * MIB  # large appends fill the stream quickly (the limit is ~8 MiB)
APPENDS = STREAM_BYTES // APPEND_BYTES
SNAPSHOT_BYTES = 32 * MIB
GROWTH_LIMIT = 64 * MIB
PUBLISH_BYTES = 128 * MIB  # max_snapshot_bytes' default
OCTETS = {"Content-Type": "application/octet-stream"}


def vm_rss(pid: int) -> int:
    """The process's resident set size in bytes, as the kernel counts it."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


class PeakSampler:
    """The largest VmRSS of a process seen every `interval_s`, from a thread of its own (so
    a busy event loop in the test does not stretch the sampling)."""

    def __init__(self, pid: int, interval_s: float = 0.02) -> None:
        self.pid, self.interval_s = pid, interval_s
        self.peak = self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, vm_rss(self.pid))
            self.samples += 1
            self._stop.wait(self.interval_s)

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


async def _fill(session: aiohttp.ClientSession, stream: str) -> None:
    """A 1 GiB stream: one small message, a snapshot at its end, then 4 MiB appends."""
    bucket = stream.rsplit("/", 1)[0]
    assert (await session.put(bucket)).status == 201
    created = await session.put(stream, data=b"first", headers=OCTETS)
    assert created.status == 201, await created.text()
    offset = created.headers["Stream-Next-Offset"]
    blob = bytes(range(256)) * (SNAPSHOT_BYTES // 256)
    snapshot = f"{stream}/snapshot/{offset}"
    published = await session.put(snapshot, data=io.BytesIO(blob), headers=OCTETS)
    assert published.status == 204, await published.text()
    body = b"\x5a" * APPEND_BYTES
    pending = asyncio.Semaphore(4)

    async def append() -> None:
        async with pending, session.post(stream, data=io.BytesIO(body), headers=OCTETS) as reply:
            assert reply.status == 204, await reply.text()

    await asyncio.gather(*(append() for _ in range(APPENDS)))


async def _bootstrap(session: aiohttp.ClientSession, stream: str) -> tuple[int, int]:
    """Read the whole bootstrap, keeping nothing: its size and its number of parts."""
    async with session.get(f"{stream}/bootstrap") as reply:
        assert reply.status == 200, await reply.text()
        boundary = reply.headers["Content-Type"].split("boundary=", 1)[1]
        delimiter = f"\r\n--{boundary}".encode()
        size = delimiters = 0
        carry = b"\r\n"  # the body opens with a delimiter without its CRLF
        async for chunk in reply.content.iter_chunked(MIB):
            size += len(chunk)
            window = carry + chunk  # a delimiter may straddle two chunks
            delimiters += window.count(delimiter)
            carry = window[-(len(delimiter) - 1) :]
        # Each part opens with a delimiter, and the close is one more.
        return size, delimiters


@pytest.mark.timeout(600)
async def test_a_1_gib_bootstrap_keeps_rss_within_64_mib_of_idle(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    env = {
        "DURABLE_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "DURABLE_KAFKA_TOPIC_PREFIX": f"mem{unique}.",
        "DURABLE_KAFKA_COLD_DIR": str(tmp_path / "cold"),
    }
    timeout = aiohttp.ClientTimeout(total=None, sock_read=60)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        with running_adapter(env, tmp_path / "fill.log", free_port()) as base:
            await _fill(session, f"{base}/bootmem/big")
        port = free_port()
        with running_adapter(env, tmp_path / "boot.log", port) as base:
            pid = adapter_pid(port)
            await asyncio.sleep(2)  # let start-up settle: idle is the ready, quiet process
            idle = max(vm_rss(pid) for _ in range(5))
            with PeakSampler(pid) as sampler:
                size, delimiters = await _bootstrap(session, f"{base}/bootmem/big")
    assert size > STREAM_BYTES + SNAPSHOT_BYTES
    # the snapshot part, one part per append, and the close: nothing lost, nothing merged.
    assert delimiters == 1 + APPENDS + 1
    assert sampler.samples >= 10  # the sampler ran through the bootstrap
    growth = sampler.peak - idle
    print(
        f"bootstrap of {size / MIB:.0f} MiB: idle {idle / MIB:.1f} MiB, peak "
        f"{sampler.peak / MIB:.1f} MiB, growth {growth / MIB:.1f} MiB, {sampler.samples} samples"
    )
    assert growth < GROWTH_LIMIT, f"RSS grew {growth / MIB:.1f} MiB over idle {idle / MIB:.1f} MiB"


async def _pieces(piece: bytes, count: int) -> AsyncIterator[bytes]:
    for _ in range(count):
        yield piece


@pytest.mark.timeout(300)
async def test_a_128_mib_publish_keeps_rss_within_64_mib_of_idle(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    env = {
        "DURABLE_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "DURABLE_KAFKA_TOPIC_PREFIX": f"pub{unique}.",
        "DURABLE_KAFKA_COLD_DIR": str(tmp_path / "cold"),
    }
    pieces = PUBLISH_BYTES // MIB
    timeout = aiohttp.ClientTimeout(total=None, sock_read=60)
    port = free_port()
    async with aiohttp.ClientSession(timeout=timeout) as session:
        with running_adapter(env, tmp_path / "publish.log", port) as base:
            stream = f"{base}/pubmem/big"
            assert (await session.put(stream.rsplit("/", 1)[0])).status == 201
            created = await session.put(stream, data=b"x", headers=OCTETS)
            offset = created.headers["Stream-Next-Offset"]
            pid = adapter_pid(port)
            await asyncio.sleep(2)
            idle = max(vm_rss(pid) for _ in range(5))
            with PeakSampler(pid) as sampler:
                body = _pieces(b"\x5a" * MIB, pieces)
                async with session.put(f"{stream}/snapshot/{offset}", data=body) as reply:
                    assert reply.status == 204, await reply.text()
            async with session.get(f"{stream}/snapshot/{offset}") as reply:
                stored = reply.content_length  # the stored size; the body is not read
    assert stored == PUBLISH_BYTES
    growth = sampler.peak - idle
    print(
        f"publish of {PUBLISH_BYTES / MIB:.0f} MiB: idle {idle / MIB:.1f} MiB, peak "
        f"{sampler.peak / MIB:.1f} MiB, growth {growth / MIB:.1f} MiB, {sampler.samples} samples"
    )
    assert growth < GROWTH_LIMIT, f"RSS grew {growth / MIB:.1f} MiB over idle {idle / MIB:.1f} MiB"
