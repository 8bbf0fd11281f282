"""The load of the SSE fan-out benchmark: subscriber worker processes and the appender process.

Both run in processes of their own (never in the server's or the orchestrator's) and talk to
the orchestrator over a `multiprocessing` pipe with small tuples. An appended message is the
text `m <seq> <time.time_ns() at send> <phase>\\n`; a subscriber takes the receive time of the
network chunk that completed the message, so latency = append sent -> SSE event read.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import aiohttp

from bench.targets import raise_fd_limit

WARMUP, MEASURED, COOLDOWN = "W", "M", "C"
_MESSAGE = re.compile(rb"m (\d+) (\d+) ([WMC])")
_OFFSET_KEY = b'"streamNextOffset":"'
BUCKET_US = 100  # latency histogram resolution
STATUS_EVERY_S = 0.5
_NO_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=None)


def message(seq: int, phase: str) -> bytes:
    return f"m {seq} {time.time_ns()} {phase}\n".encode()


# -- subscribers ---------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkerSpec:
    index: int
    urls: list[str]  # one per subscriber: the stream it tails
    connect_concurrency: int
    expected_seqs: int  # sizes the per-subscriber seen-bitmap; it grows if needed


@dataclass
class WorkerTotals:
    """What one worker process saw, summed over its subscribers."""

    histogram: Counter[int] = field(default_factory=Counter)  # latency bucket -> messages
    max_us: int = 0
    errors: int = 0  # failed connects, non-200 answers, broken connections
    disconnects: int = 0  # responses the server ended (the subscriber resumed from its offset)
    duplicates: int = 0
    chunks: int = 0  # network reads, to compare with messages: how the server batches writes
    messages: int = 0  # distinct messages received, every phase
    error_samples: list[str] = field(default_factory=list)
    lags_ms: list[float] = field(default_factory=list)  # event-loop lag while measuring

    def error(self, text: str) -> None:
        self.errors += 1
        if len(self.error_samples) < 5:
            self.error_samples.append(text)


class Subscriber:
    """One SSE connection, resumed from its last control offset if it ends."""

    __slots__ = ("buffer", "connected", "measured", "offset", "seen", "totals", "url")

    def __init__(self, url: str, totals: WorkerTotals, expected_seqs: int) -> None:
        self.url = url
        self.totals = totals
        self.offset = "now"
        self.buffer = b""
        self.seen = bytearray(expected_seqs)
        self.measured = 0  # distinct measured-phase messages received
        self.connected = asyncio.Event()

    async def run(self, session: aiohttp.ClientSession) -> None:
        while True:
            try:
                await self._tail(session)
                self.totals.disconnects += 1
            except (aiohttp.ClientError, OSError, TimeoutError) as error:
                self.totals.error(f"{type(error).__name__}: {error}")
                await asyncio.sleep(0.5)

    async def _tail(self, session: aiohttp.ClientSession) -> None:
        params = {"offset": self.offset, "live": "sse"}
        async with session.get(self.url, params=params, timeout=_NO_TIMEOUT) as response:
            if response.status != 200:
                text = (await response.read())[:200].decode(errors="replace")
                raise aiohttp.ClientResponseError(
                    response.request_info, (), status=response.status, message=text
                )
            self.buffer = b""
            async for chunk in response.content.iter_any():
                self.feed(chunk, time.time_ns())

    def feed(self, chunk: bytes, now_ns: int) -> None:
        """Take the complete events in `chunk` (plus what was left over from the last one)."""
        self.totals.chunks += 1
        data = self.buffer + chunk
        end = data.rfind(b"\n\n")
        if end < 0:
            self.buffer = data
            return
        self.buffer = data[end + 2 :]
        events = data[:end]
        for seq_text, sent_text, phase in _MESSAGE.findall(events):
            self._message(int(seq_text), int(sent_text), phase, now_ns)
        at = events.rfind(_OFFSET_KEY)
        if at >= 0:
            at += len(_OFFSET_KEY)
            self.offset = events[at : events.index(b'"', at)].decode()
            self.connected.set()

    def _message(self, seq: int, sent_ns: int, phase: bytes, now_ns: int) -> None:
        if seq >= len(self.seen):
            self.seen.extend(bytes(seq + 1024 - len(self.seen)))
        if self.seen[seq]:
            self.totals.duplicates += 1
            return
        self.seen[seq] = 1
        self.totals.messages += 1
        if phase != b"M":
            return
        self.measured += 1
        latency_us = max(0, (now_ns - sent_ns) // 1000)
        self.totals.histogram[latency_us // BUCKET_US] += 1
        self.totals.max_us = max(self.totals.max_us, latency_us)


def worker_main(spec: WorkerSpec, conn: Connection) -> None:
    """Entry point of one subscriber process."""
    raise_fd_limit()
    asyncio.run(_worker(spec, conn))


async def _worker(spec: WorkerSpec, conn: Connection) -> None:
    totals = WorkerTotals()
    subscribers = [Subscriber(url, totals, spec.expected_seqs) for url in spec.urls]
    commands: asyncio.Queue[str] = asyncio.Queue()
    loop = asyncio.get_running_loop()
    loop.add_reader(conn.fileno(), lambda: commands.put_nowait(conn.recv()))
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0)
    async with aiohttp.ClientSession(connector=connector, auto_decompress=False) as session:
        gate = asyncio.Semaphore(spec.connect_concurrency)
        tasks = [asyncio.create_task(_start(s, session, gate)) for s in subscribers]
        reporter = asyncio.create_task(_report(conn, subscribers, totals))
        lag = asyncio.create_task(_watch_lag(totals, commands))
        await lag  # returns on "stop"
        for task in [*tasks, reporter]:
            task.cancel()
        await asyncio.gather(*tasks, reporter, return_exceptions=True)
    loop.remove_reader(conn.fileno())
    conn.send(("result", _result(subscribers, totals)))


async def _start(
    subscriber: Subscriber, session: aiohttp.ClientSession, gate: asyncio.Semaphore
) -> None:
    """Hold a connect slot until the first control event, so connects ramp up gradually."""
    async with gate:
        task = asyncio.create_task(subscriber.run(session))
        connected = asyncio.create_task(subscriber.connected.wait())
        await asyncio.wait([task, connected], return_when=asyncio.FIRST_COMPLETED)
        connected.cancel()
    try:
        await task
    finally:
        task.cancel()


async def _report(conn: Connection, subscribers: list[Subscriber], totals: WorkerTotals) -> None:
    while True:
        status = {
            "connected": sum(s.connected.is_set() for s in subscribers),
            "measured": sum(s.measured for s in subscribers),
            "messages": totals.messages,
            "errors": totals.errors,
        }
        conn.send(("status", status))
        await asyncio.sleep(STATUS_EVERY_S)


async def _watch_lag(totals: WorkerTotals, commands: asyncio.Queue[str]) -> None:
    """Sample event-loop lag between "measure" and "end"; return on "stop"."""
    measuring = False
    loop = asyncio.get_running_loop()
    while True:
        with contextlib.suppress(asyncio.QueueEmpty):
            command = commands.get_nowait()
            if command == "stop":
                return
            measuring = command == "measure"
        before = loop.time()
        await asyncio.sleep(0.05)
        if measuring:
            totals.lags_ms.append((loop.time() - before - 0.05) * 1000)


def _result(subscribers: list[Subscriber], totals: WorkerTotals) -> dict[str, Any]:
    lags = sorted(totals.lags_ms)
    return {
        "histogram": dict(totals.histogram),
        "max_us": totals.max_us,
        "received": [s.measured for s in subscribers],
        "never_connected": sum(not s.connected.is_set() for s in subscribers),
        "errors": totals.errors,
        "disconnects": totals.disconnects,
        "duplicates": totals.duplicates,
        "chunks": totals.chunks,
        "messages": totals.messages,
        "error_samples": totals.error_samples,
        "lag_p99_ms": lags[int(len(lags) * 0.99)] if lags else 0.0,
        "lag_max_ms": lags[-1] if lags else 0.0,
    }


# -- appender ------------------------------------------------------------------------------


@dataclass(frozen=True)
class AppenderSpec:
    urls: list[str]  # streams, appended to round-robin
    rate: float  # appends per second, over all streams
    warmup_s: float
    measure_s: float
    cooldown_s: float


@dataclass
class AppendTotals:
    sent: int = 0
    ok: int = 0
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    latencies_us: list[int] = field(default_factory=list)
    max_behind_ms: float = 0.0  # how late the appender fired against its schedule


def appender_main(spec: AppenderSpec, conn: Connection) -> None:
    """Entry point of the appender process: one POST per tick, each stamped at send time."""
    raise_fd_limit()
    conn.send(("result", asyncio.run(_append_all(spec, conn))))


async def _append_all(spec: AppenderSpec, conn: Connection) -> dict[str, Any]:
    totals = AppendTotals()
    acked = [0] * len(spec.urls)  # measured-phase appends acknowledged, per stream
    phases = [
        (WARMUP, round(spec.warmup_s * spec.rate)),
        (MEASURED, round(spec.measure_s * spec.rate)),
        (COOLDOWN, round(spec.cooldown_s * spec.rate)),
    ]
    loop = asyncio.get_running_loop()
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0)
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        pending: set[asyncio.Task[None]] = set()
        seq, start = 0, loop.time()
        for phase, count in phases:
            conn.send(("phase", phase))
            for _ in range(count):
                due = start + seq / spec.rate
                await asyncio.sleep(max(0.0, due - loop.time()))
                totals.max_behind_ms = max(totals.max_behind_ms, (loop.time() - due) * 1000)
                stream = seq % len(spec.urls)
                post = _post(session, spec.urls[stream], seq, phase, totals, acked, stream)
                task = asyncio.create_task(post)
                pending.add(task)
                task.add_done_callback(pending.discard)
                seq += 1
        conn.send(("phase", "end"))
        await asyncio.gather(*pending)
    lat = sorted(totals.latencies_us)
    return {
        "sent": totals.sent,
        "ok": totals.ok,
        "errors": totals.errors,
        "error_samples": totals.error_samples,
        "acked_measured": acked,
        "seqs": seq,
        "append_p50_ms": lat[len(lat) // 2] / 1000 if lat else 0.0,
        "append_p99_ms": lat[int(len(lat) * 0.99)] / 1000 if lat else 0.0,
        "max_behind_ms": totals.max_behind_ms,
    }


async def _post(
    session: aiohttp.ClientSession,
    url: str,
    seq: int,
    phase: str,
    totals: AppendTotals,
    acked: list[int],
    stream: int,
) -> None:
    body = message(seq, phase)
    sent = time.perf_counter_ns()
    totals.sent += 1
    try:
        async with session.post(url, data=body, headers={"Content-Type": "text/plain"}) as reply:
            await reply.read()
            ok = reply.status in (200, 204)
            if not ok:
                raise aiohttp.ClientResponseError(reply.request_info, (), status=reply.status)
    except (aiohttp.ClientError, OSError, TimeoutError) as error:
        totals.errors += 1
        if len(totals.error_samples) < 5:
            totals.error_samples.append(f"{type(error).__name__}: {error}")
        return
    totals.ok += 1
    totals.latencies_us.append((time.perf_counter_ns() - sent) // 1000)
    if phase == MEASURED:
        acked[stream] += 1
