"""Hostile inputs sent to one running instance while a probe measures it.

The shapes: idle connections by the thousand (past the descriptor limit), idle SSE sessions,
heads and bodies sent a byte at a time, a megabyte URL, thousands of headers, compressed bombs
on every route that takes a body, a JSON array of millions of messages, JSON nested 100,000
deep on every route that reads JSON, control bodies of almost 8 MiB many at once (declared and
chunked) and control JSON nested deep or with huge numbers, malformed W3C trace contexts on
appends, bucket listings with odd query parameters (page sizes, cursors and prefixes: each
gets its exact status and JSON error code). Meanwhile a probe asks `/healthz` every 20 ms on a
connection of its own, timing each answer (the longest is the worst stall of the event loop,
plus a round trip), and samples the process's resident memory.

`tests/integration/test_hostile.py` runs the shapes at `BOUNDED` sizes and asserts what must
hold: the process never exits, its resident memory never grows more than `RSS_GROWTH_BYTES`
over its baseline, nothing is answered 5xx but 503 `too_many_connections`, and a write made
afterwards succeeds. `make hostile` (`python -m tests.hostile`) runs them at `FULL` sizes on a
broker of its own and prints every measure, the longest stall among them: a timing, reported,
never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import gzip
import itertools
import json
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit

import aiohttp
import jwt
from backports import zstd
from yarl import URL

from adapter.http.credentials import JWKS_REFETCH_MIN_S
from adapter.tracing import TRACEPARENT
from tests.adapter_process import adapter_pid, running_adapter
from tests.identity_provider import SCOPES, IdentityProvider
from tests.kafka_reads import committed_messages
from tests.tokens import Signer
from topology.naming import bucket_topic
from topology.wire import CONTROL_HEADER, header_value

RSS_GROWTH_BYTES = 64 * 1024 * 1024
# The answers where a 503 `too_many_connections` is right: connections the limits refuse.
REFUSED_SHAPES = ("idle", "sse", "probe")
# The instance's descriptor limit: 512 client connections once its reserve is kept.
NOFILE = 1024
HEADER_TIMEOUT_MS = 30_000  # long: a refusal must not wait for it
STALL_S = 0.1  # a probe answer slower than this counts as a stall
PROBE_EVERY_S = 0.02
SAMPLE_EVERY_S = 0.01
ANSWER_TIMEOUT_S = 10.0  # a bounded wait for an answer: an end, never a timing
DEEP = 100_000
JSON = "application/json"
TEXT = "text/plain"
# The largest body is `max_message_bytes` (8 MiB) less 16 KiB: this array just fits, 4.19M
# messages in 8 KiB of gzip.
JSON_BOMB_MESSAGES = (8 * 1024 * 1024 - 16 * 1024 - 3) // 2
CODED_BOMB_BYTES = 64 * 1024 * 1024  # far past every route's limit


@dataclass(frozen=True)
class Sizes:
    idle_connections: int
    idle_sse: int
    slow_clients: int
    hold_s: float  # how long idle and slow clients are kept
    requests: int  # seeks past the console's limit, and tokens naming forged kids


BOUNDED = Sizes(idle_connections=1_500, idle_sse=300, slow_clients=40, hold_s=3.0, requests=2_000)
FULL = Sizes(
    idle_connections=8_000, idle_sse=3_000, slow_clients=1_000, hold_s=15.0, requests=50_000
)
# Requests in flight at once for the shapes sent at volume (each on a kept-alive connection).
IN_FLIGHT = 64


@dataclass
class Target:
    """The instance under test and what the shapes send to."""

    url: str
    pid: int
    bucket: str = field(default_factory=lambda: f"hostile-{uuid.uuid4().hex[:8]}")
    prefix: str = ""  # the instance's topic prefix

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or "127.0.0.1"

    @property
    def port(self) -> int:
        return urlsplit(self.url).port or 80

    @property
    def text(self) -> str:
        return f"/{self.bucket}/text"

    @property
    def json(self) -> str:
        return f"/{self.bucket}/json"


@dataclass
class Measures:
    """What the probe saw, and what the shapes were answered."""

    baseline_rss: int
    peak_rss: int = 0
    max_stall_s: float = 0.0
    shape_stall_s: float = 0.0  # the longest during the shape running now
    stalls: int = 0
    probes: int = 0
    answers: Counter[str] = field(default_factory=Counter)  # "shape: status" -> how many
    notes: list[str] = field(default_factory=list)

    @property
    def rss_growth(self) -> int:
        return max(0, self.peak_rss - self.baseline_rss)

    def server_errors(self) -> list[str]:
        """Answers 5xx, or none at all, other than a refusal over the connection limits
        (503 to a new connection while they are full)."""
        return [key for key in self.answers if not _expected(key)]


def _expected(answer: str) -> bool:
    *shape, status = answer.rsplit(" ", 1)
    if status == "503" and shape[0].startswith(REFUSED_SHAPES):
        return True
    return status.isdigit() and int(status) < 500


def resident(pid: int) -> tuple[int, int]:
    """The process's resident memory now and at its peak (VmRSS, VmHWM), in bytes."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        fields[name] = value
    return int(fields["VmRSS"].split()[0]) * 1024, int(fields["VmHWM"].split()[0]) * 1024


def descriptors(pid: int) -> int:
    """How many descriptors the process has open."""
    try:
        return len(list(Path(f"/proc/{pid}/fd").iterdir()))
    except FileNotFoundError:
        return 0


def alive(pid: int) -> bool:
    """Whether the process runs (an exited one not yet reaped is a zombie: not alive)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


class Probe:
    """`/healthz` every `PROBE_EVERY_S` on a kept-alive connection, each answer timed, and the
    process's resident memory every `SAMPLE_EVERY_S`. The answers are asked and timed by a
    process of their own (`probe_answers`): a thread of this one waited for the interpreter
    lock behind the shapes' thousands of clients (a wave of 1,000 slow clients held it 100 ms
    at a time), and counted that wait as the instance's stall. A thread here reads what that
    process reports, and samples memory (a peak between two samples shows in VmHWM anyway)."""

    def __init__(self, target: Target, measures: Measures) -> None:
        self.target, self.measures = target, measures
        _, self.baseline_peak = resident(target.pid)
        self.stopped = threading.Event()

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        asking = f"from tests.hostile import probe_answers; probe_answers({self.target.url!r})"
        command = [sys.executable, "-c", asking]
        with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as answers:
            assert answers.stdout is not None
            assert answers.stdout.readline().strip() == "probing"
            reading = threading.Thread(target=self._reading, args=(answers.stdout,), daemon=True)
            sampling = threading.Thread(target=self._sampling, daemon=True)
            reading.start()
            sampling.start()
            try:
                yield
            finally:
                self.stopped.set()
                answers.terminate()
                reading.join(ANSWER_TIMEOUT_S)
                sampling.join(ANSWER_TIMEOUT_S)

    def _sampling(self) -> None:
        """Resident memory every few milliseconds, the instance stalled or not."""
        while not self.stopped.is_set():
            self.sample()
            time.sleep(SAMPLE_EVERY_S)

    def _reading(self, lines: IO[str]) -> None:
        for line in lines:
            took, _, answer = line.strip().partition(" ")
            self.record(float(took), answer)

    def record(self, took: float, answer: str) -> None:
        """One probe answered (`answer`: its status, or how it failed) after `took` seconds."""
        self.measures.answers[f"probe {answer}"] += 1
        self.measures.probes += 1
        self.measures.stalls += took > STALL_S
        self.measures.max_stall_s = max(self.measures.max_stall_s, took)
        self.measures.shape_stall_s = max(self.measures.shape_stall_s, took)

    def sample(self) -> None:
        if not alive(self.target.pid):
            return  # nothing to measure: what to say of it is the caller's
        with contextlib.suppress(FileNotFoundError):
            now, peak = resident(self.target.pid)
            # A peak between two samples shows in VmHWM, once it passes the one before.
            reached = peak if peak > self.baseline_peak else 0
            self.measures.peak_rss = max(self.measures.peak_rss, now, reached)


def probe_answers(url: str) -> None:
    """The probe's process: `/healthz` at `url` every `PROBE_EVERY_S`, one line per answer
    (`seconds status`) on stdout, until terminated."""
    asyncio.run(_probing(url))


async def _probing(url: str) -> None:
    connector = aiohttp.TCPConnector(limit=1)
    timeout = aiohttp.ClientTimeout(total=ANSWER_TIMEOUT_S)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        print("probing", flush=True)
        while True:
            started = time.monotonic()
            try:
                async with session.get(f"{url}/healthz") as response:
                    await response.read()
                    answer = str(response.status)
            except (aiohttp.ClientError, TimeoutError) as error:
                answer = type(error).__name__
            print(f"{time.monotonic() - started:.6f} {answer}", flush=True)
            await asyncio.sleep(PROBE_EVERY_S)


# --- raw HTTP: the shapes speak it by hand, as a hostile client would ---------------------


@contextlib.asynccontextmanager
async def connection(
    target: Target,
) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    opening = asyncio.open_connection(target.host, target.port)
    reader, writer = await asyncio.wait_for(opening, ANSWER_TIMEOUT_S)
    try:
        yield reader, writer
    finally:
        writer.close()


def head(method: str, path: str, *lines: str) -> bytes:
    return "\r\n".join([f"{method} {path} HTTP/1.1", "Host: localhost", *lines, "", ""]).encode()


async def status_of(reader: asyncio.StreamReader) -> str:
    """The status of the answer, or how the connection ended without one."""
    try:
        line = await asyncio.wait_for(reader.readline(), ANSWER_TIMEOUT_S)
    except TimeoutError:
        return "no answer"
    except ConnectionError:
        return "reset"
    return line.split()[1].decode() if line.startswith(b"HTTP/") else "closed"


async def ask(target: Target, request: bytes) -> str:
    try:
        async with connection(target) as (reader, writer):
            writer.write(request)
            with contextlib.suppress(ConnectionError):
                await writer.drain()
            return await status_of(reader)
    except (ConnectionError, TimeoutError):
        return "not connected"


async def send(
    target: Target, method: str, path: str, body: bytes, content_type: str, coding: str = ""
) -> str:
    lines = [f"Content-Type: {content_type}", f"Content-Length: {len(body)}"]
    lines += [f"Content-Encoding: {coding}"] if coding else []
    return await ask(target, head(method, path, *lines) + body)


# --- the shapes ---------------------------------------------------------------------------

Shape = Callable[[Target, Sizes, Measures], Awaitable[None]]


async def idle_connections(target: Target, sizes: Sizes, measures: Measures) -> None:
    """Connections opened and left silent, far past what the instance may hold; while they
    are held a new client is answered (refused at once, or served), never left waiting."""
    async with contextlib.AsyncExitStack() as held:
        ends = [await _idle(target, held) for _ in range(sizes.idle_connections)]
        opened = [end for end in ends if end is not None]
        await asyncio.sleep(sizes.hold_s)
        measures.notes.append(f"descriptors open while held: {descriptors(target.pid)}")
        closed = sum(end.done() for end in opened)
        measures.notes.append(
            f"idle connections: {len(opened)} of {len(ends)} opened, "
            f"{closed} closed by the instance within {sizes.hold_s:g} s"
        )
        measures.answers[f"idle: a new client {await ask(target, head('GET', '/healthz'))}"] += 1
        for end in opened:
            end.cancel()


async def _idle(target: Target, held: contextlib.AsyncExitStack) -> asyncio.Task[bytes] | None:
    """A connection held open in `held` (None if it could not be made), and the task that
    ends when the instance closes it."""
    try:
        reader, _ = await held.enter_async_context(connection(target))
    except (ConnectionError, TimeoutError):
        return None
    return asyncio.create_task(_until_closed(reader))


async def _until_closed(reader: asyncio.StreamReader) -> bytes:
    with contextlib.suppress(ConnectionError):
        return await reader.read()
    return b""


async def idle_sse(target: Target, sizes: Sizes, measures: Measures) -> None:
    """SSE sessions opened on a stream nobody writes to, held."""
    request = head("GET", f"{target.text}?offset=now&live=sse")
    async with contextlib.AsyncExitStack() as held:
        for _ in range(sizes.idle_sse):
            reader, writer = await held.enter_async_context(connection(target))
            writer.write(request)
            measures.answers[f"sse {await status_of(reader)}"] += 1
        await asyncio.sleep(sizes.hold_s)


async def slow_heads(target: Target, sizes: Sizes, measures: Measures) -> None:
    """Heads sent a byte at a time."""
    await _dribbled(target, sizes, measures, "slow head", head("GET", "/healthz")[:-2])


async def slow_bodies(target: Target, sizes: Sizes, measures: Measures) -> None:
    """Bodies sent a byte at a time, far shorter than their Content-Length."""
    start = head("POST", target.text, f"Content-Type: {TEXT}", "Content-Length: 100000")
    await _dribbled(target, sizes, measures, "slow body", start)


async def _dribbled(
    target: Target, sizes: Sizes, measures: Measures, name: str, start: bytes
) -> None:
    async def one() -> None:
        async with connection(target) as (_, writer):
            writer.write(start)
            deadline = time.monotonic() + sizes.hold_s
            with contextlib.suppress(ConnectionError):
                while time.monotonic() < deadline and not writer.is_closing():
                    writer.write(b"x")
                    await writer.drain()
                    await asyncio.sleep(0.2)

    outcomes = await asyncio.gather(
        *(one() for _ in range(sizes.slow_clients)), return_exceptions=True
    )
    failed = Counter(type(outcome).__name__ for outcome in outcomes if outcome is not None)
    measures.notes.append(f"{name}: {sizes.slow_clients} clients, not connected: {dict(failed)}")


async def huge_url(target: Target, sizes: Sizes, measures: Measures) -> None:
    path = f"{target.text}?{'a' * 1024 * 1024}"
    measures.answers[f"huge url {await ask(target, head('GET', path))}"] += 1


async def many_headers(target: Target, sizes: Sizes, measures: Measures) -> None:
    lines = [f"X-Header-{n}: {n}" for n in range(20_000)]
    measures.answers[f"many headers {await ask(target, head('GET', '/healthz', *lines))}"] += 1


def body_routes(target: Target) -> list[tuple[str, str, str]]:
    """Every route that takes a body: (method, path, content type)."""
    bucket, stream = target.bucket, target.json
    return [
        ("PUT", f"/{bucket}-new", JSON),
        ("PUT", f"/{bucket}/config", JSON),
        ("PUT", f"/{bucket}/new-json", JSON),
        ("PUT", f"/{bucket}/new-text", TEXT),
        ("POST", stream, JSON),
        ("POST", target.text, TEXT),
        ("POST", f"{stream}/trim", JSON),
        ("POST", f"{stream}/fence", JSON),
        ("POST", f"/v1/stream/{bucket}/json", JSON),
        ("PUT", f"{target.text}/snapshot/0000000000000000_0000000000000000", TEXT),
    ]


@dataclass(frozen=True)
class Bombs:
    gzip: bytes
    zstd: bytes
    json_array: bytes  # gzip of a JSON array of JSON_BOMB_MESSAGES zeros


@functools.cache
def bombs() -> Bombs:
    zeros = bytes(CODED_BOMB_BYTES)
    array = b"[" + b"0," * JSON_BOMB_MESSAGES + b"0]"
    return Bombs(gzip.compress(zeros, 9), zstd.compress(zeros, 19), gzip.compress(array, 9))


async def coded_bombs(target: Target, sizes: Sizes, measures: Measures) -> None:
    """A small body that decodes to 64 MiB, gzip and zstd, to every route that takes one."""
    made = bombs()
    for method, path, content_type in body_routes(target):
        for coding, body in (("gzip", made.gzip), ("zstd", made.zstd)):
            status = await send(target, method, path, body, content_type, coding)
            measures.answers[f"{coding} bomb {method} {path} {status}"] += 1


async def json_array_bomb(target: Target, sizes: Sizes, measures: Measures) -> None:
    """8 KiB of gzip that is a JSON array of 4.19M messages, to every JSON message route."""
    body = bombs().json_array
    for method, path in (("POST", target.json), ("PUT", f"/{target.bucket}/new-json")):
        status = await send(target, method, path, body, JSON, "gzip")
        measures.answers[f"json array bomb {method} {path} {status}"] += 1


async def deep_json(target: Target, sizes: Sizes, measures: Measures) -> None:
    """`[[[[...]]]]` 100,000 deep to every route that takes a body."""
    body = b"[" * DEEP + b"]" * DEEP
    for method, path, content_type in body_routes(target):
        if content_type == JSON:
            status = await send(target, method, path, body, content_type)
            measures.answers[f"deep json {method} {path} {status}"] += 1


# Control bodies (bucket configurations, mounts, trims, fences) are small by nature: any over
# `CONTROL_BODY_BYTES` is 413 before more of it is read, whether its length is declared or
# it comes in chunks. Sent here just under the largest append body, several at once per route.
CONTROL_BODY_BYTES = 64 * 1024
BIG_CONTROL_BYTES = 8 * 1024 * 1024 - 32 * 1024
CONTROL_IN_FLIGHT = 8
WRITE_PIECE = 256 * 1024


def control_routes(target: Target) -> list[tuple[str, str]]:
    """Every route whose body is a control document: (method, path)."""
    bucket, stream = target.bucket, target.json
    return [
        ("PUT", f"/{bucket}-new"),
        ("PUT", f"/{bucket}/config"),
        ("POST", f"{stream}/trim"),
        ("POST", f"{stream}/fence"),
        ("POST", f"/v1/stream/{bucket}/json/trim"),
    ]


@functools.cache
def big_control_body() -> bytes:
    """A JSON document just under the largest append body: a string of `x`."""
    return b'{"retention": "' + b"x" * (BIG_CONTROL_BYTES - 17) + b'"}'


async def sent_whole(target: Target, request: bytes, body: bytes) -> str:
    """The status of `request` then `body`, read while the body is still being written: an
    early answer (413 before the body is read) is seen even if the instance then closes."""
    try:
        async with connection(target) as (reader, writer):
            answer = asyncio.ensure_future(status_of(reader))
            writer.write(request)
            with contextlib.suppress(ConnectionError):
                for start in range(0, len(body), WRITE_PIECE):
                    if answer.done() or writer.is_closing():
                        break
                    writer.write(body[start : start + WRITE_PIECE])
                    await writer.drain()
            return await answer
    except (ConnectionError, TimeoutError):
        return "not connected"


def chunked(body: bytes) -> bytes:
    """`body` in HTTP/1.1 chunks of `WRITE_PIECE` bytes, and the last chunk."""
    pieces = (body[n : n + WRITE_PIECE] for n in range(0, len(body), WRITE_PIECE))
    return b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n\r\n"


async def control_bodies(target: Target, sizes: Sizes, measures: Measures) -> None:
    """`CONTROL_IN_FLIGHT` bodies of almost 8 MiB at once to every control route, their length
    declared, then as many sent in chunks."""
    body = big_control_body()
    coded = chunked(body)
    for method, path in control_routes(target):
        declared = head(method, path, f"Content-Type: {JSON}", f"Content-Length: {len(body)}")
        by_chunks = head(method, path, f"Content-Type: {JSON}", "Transfer-Encoding: chunked")
        for name, request, payload in (("declared", declared, body), ("chunked", by_chunks, coded)):
            sending = [sent_whole(target, request, payload) for _ in range(CONTROL_IN_FLIGHT)]
            for status in await asyncio.gather(*sending):
                measures.answers[f"{name} control body {method} {path} {status}"] += 1


# Small control documents that are no JSON a control route takes: nested past any parser's
# depth, and numbers far past any count, each within `CONTROL_BODY_BYTES`.
HOSTILE_CONTROL_JSON = {
    "nested": b"[" * 30_000 + b"]" * 30_000,
    "nested objects": b'{"a":' * 10_000 + b"1" + b"}" * 10_000,
    "long integer": b'{"retention": {"max_age_ms": 1' + b"0" * 4_000 + b"}}",
    "integer past the digit limit": b'{"retention": {"max_age_ms": 1' + b"0" * 5_000 + b"}}",
    "huge exponent": b'{"retention": {"max_age_ms": 1e999999999}}',
    "long fraction": b'{"retention": {"max_age_ms": 0.' + b"1" * 60_000 + b"}}",
    "long integer time": b'{"at": 1' + b"0" * 4_000 + b"}",
    "huge exponent time": b'{"at": -1e999999999}',
    "long time string": b'{"at": "' + b"9" * 60_000 + b'"}',
    "long offset": b'{"before": "' + b"0" * 60_000 + b'"}',
}


async def control_json(target: Target, sizes: Sizes, measures: Measures) -> None:
    """Each hostile control document to every control route that reads one."""
    for method, path in control_routes(target):
        if path.endswith("/fence"):
            continue  # a fence reads no body
        for name, body in HOSTILE_CONTROL_JSON.items():
            status = await send(target, method, path, body, JSON)
            measures.answers[f"control json {name} {method} {path} {status}"] += 1


# `traceparent` values no W3C parser takes, each sent on an append alone, and a `tracestate` past
# any sane size beside a valid one. A record's `traceparent` is then absent (tracing off) or
# one the instance made (on): never one of these.
VALID_TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
HOSTILE_TRACEPARENTS: dict[str, bytes] = {
    "version ff": b"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    "version 01 with a tail": b"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xyz",
    "bad hex": b"00-4bf92f3577b34da6a3ce929d0e0e47zz-00f067aa0ba902b7-01",
    "upper-case hex": b"00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",
    "all-zero trace id": b"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
    "all-zero span id": b"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
    "too short": b"00-4bf92f35-00f067aa-01",
    "empty": b"",
    "latin-1": b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-\xe9\xff",
    "utf-8": "00-\u00e9\u00e9-\u2603-01".encode(),
    "control bytes": b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0\x01",
    "8 KiB": b"00-" + b"a" * 8_000,
}
TRACEPARENT_REPEATS = 100  # one request with this many `traceparent` fields
TRACEPARENT_HUGE_BYTES = 100 * 1024  # past any field's limit: 431, as for any header


def trace_requests(target: Target) -> dict[str, bytes]:
    """Each hostile trace context as an append's whole request, by name."""
    start = f"POST {target.text} HTTP/1.1\r\nHost: localhost\r\nContent-Type: {TEXT}\r\n".encode()

    def append(name: str, *fields: bytes) -> bytes:
        body = f"trace {name}".encode()
        lines = b"".join(field + b"\r\n" for field in fields)
        return start + lines + b"Content-Length: %d\r\n\r\n" % len(body) + body

    requests = {
        name: append(name, b"traceparent: " + value) for name, value in HOSTILE_TRACEPARENTS.items()
    }
    garbage = HOSTILE_TRACEPARENTS["bad hex"]
    requests["repeated"] = append("repeated", *[b"traceparent: " + garbage] * TRACEPARENT_REPEATS)
    requests["valid then garbage"] = append(
        "valid then garbage",
        b"traceparent: " + VALID_TRACEPARENT.encode(),
        b"traceparent: " + garbage,
    )
    state = b"tracestate: " + b",".join(b"k%d=%s" % (n, b"v" * 200) for n in range(30))
    requests["huge tracestate"] = append(
        "huge tracestate", b"traceparent: " + VALID_TRACEPARENT.encode(), state
    )
    requests["latin-1 tracestate"] = append(
        "latin-1 tracestate",
        b"traceparent: " + VALID_TRACEPARENT.encode(),
        b"tracestate: a=\xe9\xff",
    )
    requests["100 KiB"] = append("100 KiB", b"traceparent: 00-" + b"a" * TRACEPARENT_HUGE_BYTES)
    return requests


async def trace_contexts(target: Target, sizes: Sizes, measures: Measures) -> None:
    """Each hostile trace context on an append of its own, one after another."""
    for name, request in trace_requests(target).items():
        measures.answers[f"trace context {name} {await ask(target, request)}"] += 1


# The console's seek to the last N messages past `console_max_last` (10,000 by default),
# far past it, and not a count at all: each is 400 `invalid_query` before anything is read.
SEEK_LASTS = ("10001", "1000000", str(10**40), "0", "-1", "1e9", "%EF%BC%91")


async def seeks_over_the_limit(target: Target, sizes: Sizes, measures: Measures) -> None:
    """`/ui/api/seek/{bucket}/{stream}?last=N` with N over the limit, by the thousand."""
    paths = [
        f"/ui/api/seek/{target.bucket}/{stream}?last={SEEK_LASTS[n % len(SEEK_LASTS)]}"
        for n, stream in zip(range(sizes.requests), itertools.cycle(("text", "json")))
    ]
    statuses = await at_volume(target, [(path, {}) for path in paths])
    measures.answers.update(f"seek over the limit {status}" for status in statuses)


async def at_volume(target: Target, requests: list[tuple[str, dict[str, str]]]) -> list[str]:
    """GET each (path, headers), `IN_FLIGHT` at a time; each answer's status, or the error
    that ended it."""
    gate = asyncio.Semaphore(IN_FLIGHT)
    timeout = aiohttp.ClientTimeout(total=ANSWER_TIMEOUT_S)
    connector = aiohttp.TCPConnector(limit=IN_FLIGHT)

    async def one(session: aiohttp.ClientSession, path: str, headers: dict[str, str]) -> str:
        async with gate:
            try:
                async with session.get(f"{target.url}{path}", headers=headers) as response:
                    await response.read()
                    return str(response.status)
            except (aiohttp.ClientError, TimeoutError) as error:
                return type(error).__name__

    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        return await asyncio.gather(*(one(session, path, hs) for path, hs in requests))


# Query parameters of a bucket's listing (`GET /{bucket}/streams`), percent-encoded as sent, and
# the answer each gets (status, error code): page sizes out of 1..1000 or not ASCII digits,
# cursors (`after`) and prefixes no stream id could be or start with (over 122 bytes, a NUL,
# not UTF-8 once percent-decoded) are 400 `invalid_query`; a request line past 8 KiB is 414.
# Odd but valid ones (other scripts, a cursor past every id or before the prefix) are 200.
MAX_ID = 122  # the most bytes a stream id holds
LISTING_QUERIES: dict[str, tuple[str, int, str | None]] = {
    "limit 0": ("limit=0", 400, "invalid_query"),
    "limit 1001": ("limit=1001", 400, "invalid_query"),
    "limit -1": ("limit=-1", 400, "invalid_query"),
    "limit 10^40": (f"limit={10**40}", 400, "invalid_query"),
    "limit 1e3": ("limit=1e3", 400, "invalid_query"),
    "limit 1.5": ("limit=1.5", 400, "invalid_query"),
    "limit empty": ("limit=", 400, "invalid_query"),
    "limit 0x10": ("limit=0x10", 400, "invalid_query"),
    "limit space 1": ("limit=%201", 400, "invalid_query"),
    "limit fullwidth 1": ("limit=%EF%BC%91", 400, "invalid_query"),
    "limit arabic-indic 1": ("limit=%D9%A1", 400, "invalid_query"),
    "limit not UTF-8": ("limit=%FF", 400, "invalid_query"),
    "after one byte over": (f"after={'a' * (MAX_ID + 1)}", 400, "invalid_query"),
    "after of 8 KB": (f"after={'a' * 8_000}", 400, "invalid_query"),
    "after of 1 MiB": (f"after={'a' * 2**20}", 414, "uri_too_long"),
    "after with NUL": ("after=a%00b", 400, "invalid_query"),
    "after not UTF-8": ("after=%FF%FE", 400, "invalid_query"),
    "after a surrogate": ("after=%ED%A0%80", 400, "invalid_query"),
    "after overlong /": ("after=%C0%AF", 400, "invalid_query"),
    "prefix one byte over": (f"prefix={'%C3%A9' * 61}a", 400, "invalid_query"),
    "prefix NUL": ("prefix=%00", 400, "invalid_query"),
    "prefix truncated UTF-8": ("prefix=%E2%98", 400, "invalid_query"),
    "prefix snowman": ("prefix=%E2%98%83", 200, None),
    "prefix emoji": ("prefix=%F0%9F%98%80&limit=1", 200, None),
    "prefix U+FFFD": ("prefix=%EF%BF%BD", 200, None),
    "prefix with /": ("prefix=a%2Fb", 200, None),
    "prefix of 122 bytes": (f"prefix={'%C3%A9' * 61}", 200, None),
    "after past every id": ("after=%F4%8F%BF%BF", 200, None),
    "after before the prefix": ("prefix=t&after=a&limit=0001", 200, None),
}


async def listing_queries(target: Target, sizes: Sizes, measures: Measures) -> None:
    """Each odd listing query once; its answer counted as `listing {name} {code} {status}`
    (`-`: no error code)."""
    timeout = aiohttp.ClientTimeout(total=ANSWER_TIMEOUT_S)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        for name, (query, _, _) in LISTING_QUERIES.items():
            url = URL(f"{target.url}/{target.bucket}/streams?{query}", encoded=True)
            status, code = await _answer(session, url)
            measures.answers[f"listing {name} {code or '-'} {status}"] += 1


async def _answer(session: aiohttp.ClientSession, url: URL) -> tuple[str, str | None]:
    """The status of a GET of `url` and the error code of its JSON body (None: none)."""
    try:
        async with session.get(url) as response:
            body = await response.read()
    except (aiohttp.ClientError, TimeoutError) as error:
        return type(error).__name__, None
    try:
        return str(response.status), str(json.loads(body)["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return str(response.status), None


SHAPES: list[Shape] = [
    idle_connections,
    idle_sse,
    slow_heads,
    slow_bodies,
    huge_url,
    many_headers,
    coded_bombs,
    json_array_bomb,
    deep_json,
    seeks_over_the_limit,
    listing_queries,
    control_bodies,
    control_json,
    trace_contexts,
]


async def prepare(target: Target) -> None:
    """The bucket and the two streams the shapes aim at, and one write to each."""
    for method, path, content_type, body in (
        ("PUT", f"/{target.bucket}", TEXT, b""),
        ("PUT", target.text, TEXT, b""),
        ("PUT", target.json, JSON, b""),
        ("POST", target.text, TEXT, b"first"),
        ("POST", target.json, JSON, b"[1]"),
    ):
        status = await send(target, method, path, body, content_type)
        assert status in ("201", "204"), f"{method} {path}: {status}"


async def write_after(target: Target) -> str:
    """The status of a write made once every shape has ended (204 when it succeeds)."""
    return await send(target, "POST", target.text, b"after", TEXT)


async def run_shapes(target: Target, sizes: Sizes, shapes: list[Shape] = SHAPES) -> Measures:
    """Every shape in turn, each while the probe runs; the measures of the whole."""
    await asyncio.to_thread(bombs)  # made before the probe starts: seconds of CPU, once
    await prepare(target)
    measures = Measures(baseline_rss=resident(target.pid)[0])
    measures.notes.append(f"descriptors open before: {descriptors(target.pid)}")
    probe = Probe(target, measures)
    with probe.running():
        for shape in shapes:
            started, measures.shape_stall_s = time.monotonic(), 0.0
            await shape(target, sizes, measures)
            took = time.monotonic() - started
            probe.sample()
            peak = measures.rss_growth / 2**20
            now = resident(target.pid)[0] if alive(target.pid) else measures.baseline_rss
            measures.notes.append(
                f"{shape.__name__}: {took:.1f} s, memory growth: at most {peak:.0f} MiB so far, "
                f"{(now - measures.baseline_rss) / 2**20:.0f} MiB now; "
                f"longest /healthz {measures.shape_stall_s * 1000:.0f} ms"
            )
            if not alive(target.pid):
                measures.notes.append(f"the process exited during {shape.__name__}")
                break
    probe.sample()
    return measures


# --- forged kids: an instance checking JWTs against an identity provider's JWKS URL --------


def forged_tokens(count: int) -> list[str]:
    """Tokens signed by a key nobody published, each naming a kid of its own."""
    forger = Signer("forger")
    claims = jwt.decode(forger.token(SCOPES), options={"verify_signature": False})
    return [
        jwt.encode(claims, forger.key, algorithm="ES256", headers={"kid": f"forged-{n}"})
        for n in range(count)
    ]


async def forged_kids(
    target: Target, identity: IdentityProvider, sizes: Sizes
) -> tuple[Measures, int]:
    """`sizes.requests` requests whose tokens name forged kids, while the probe runs: each
    unknown kid may fetch the JWKS, at most once per 10 s (operations, "jwt"). The measures,
    and how many times the identity provider was asked for its set meanwhile."""
    tokens = await asyncio.to_thread(forged_tokens, sizes.requests)
    measures = Measures(baseline_rss=resident(target.pid)[0])
    before, started = identity.fetches, time.monotonic()
    with Probe(target, measures).running():
        requests = [("/ui/api/buckets", {"Authorization": f"Bearer {t}"}) for t in tokens]
        statuses = await at_volume(target, requests)
    fetched = identity.fetches - before
    measures.answers.update(f"forged kid {status}" for status in statuses)
    measures.notes.append(
        f"forged kids: {len(tokens)} in {time.monotonic() - started:.1f} s, "
        f"the identity provider asked for its set {fetched} times"
    )
    return measures, fetched


def fetches_allowed(took_s: float) -> int:
    """The most JWKS fetches unknown kids may cause in `took_s` (one per 10 s, the first at
    once), and one more: the set's own refresh, if its lifetime ended meanwhile."""
    return 2 + int(took_s // JWKS_REFETCH_MIN_S)


async def signed_after(target: Target, identity: IdentityProvider) -> str:
    """The status of a request with a token of the provider's key, once the forged ones ended
    (200 when it is let in)."""
    (status,) = await at_volume(target, [("/ui/api/buckets", identity.headers())])
    return status


@contextlib.contextmanager
def jwt_instance(bootstrap: str, home: Path, identity: IdentityProvider) -> Iterator[Target]:
    """One adapter process trusting `identity`'s JWKS URL."""
    env = adapter_env(bootstrap, home) | identity.settings()
    with running_adapter(env, home / "adapter-jwt.log") as url:
        yield Target(url, adapter_pid(urlsplit(url).port or 0))


def adapter_env(bootstrap: str, home: Path, prefix: str = "") -> dict[str, str]:
    return {
        "DURABLE_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "DURABLE_KAFKA_TOPIC_PREFIX": prefix or f"h{uuid.uuid4().hex[:10]}.",
        "DURABLE_KAFKA_COLD_DIR": str(home / "cold"),
        "DURABLE_KAFKA_PARTITIONS": "1",
        "DURABLE_KAFKA_HEADER_TIMEOUT_MS": str(HEADER_TIMEOUT_MS),
    }


@contextlib.contextmanager
def hostile_instance(
    bootstrap: str, home: Path, nofile: int = NOFILE, tracing_endpoint: str = ""
) -> Iterator[Target]:
    """One adapter process, its descriptors limited to `nofile`; tracing to `tracing_endpoint`
    if one is given."""
    prefix = f"h{uuid.uuid4().hex[:10]}."
    env = adapter_env(bootstrap, home, prefix)
    if tracing_endpoint:
        env["DURABLE_KAFKA_TRACING_ENDPOINT"] = tracing_endpoint
    name = "adapter-traced.log" if tracing_endpoint else "adapter.log"
    with running_adapter(env, home / name, nofile=nofile) as url:
        yield Target(url, adapter_pid(urlsplit(url).port or 0), prefix=prefix)


# Tracing on, to an OTLP endpoint nobody listens on: spans are exported off the requests' path,
# so no answer waits for it.
SILENT_COLLECTOR = "http://127.0.0.1:9"
W3C_TRACEPARENT = re.compile(r"00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}")


def copied_traceparents(bootstrap: str, target: Target) -> list[bytes]:
    """The records of a tracing instance whose `traceparent` is missing, not W3C, or one a
    client sent."""
    sent = set(HOSTILE_TRACEPARENTS.values())
    return [
        value
        for value, traceparent in record_traceparents(bootstrap, target).items()
        if traceparent is None
        or traceparent in sent
        or not W3C_TRACEPARENT.fullmatch(traceparent.decode("latin-1"))
    ]


def record_traceparents(bootstrap: str, target: Target) -> dict[bytes, bytes | None]:
    """Each data record of the target's text stream: its value, and its `traceparent` header
    (None: none), as a fresh consumer reads them."""
    topic = bucket_topic(target.prefix, target.bucket)
    return {
        message.value() or b"": header_value(message.headers(), TRACEPARENT)
        for message in committed_messages(bootstrap, topic)
        if message.key() == b"text" and header_value(message.headers(), CONTROL_HEADER) is None
    }


def report(measures: Measures) -> str:
    lines = [
        f"probes: {measures.probes}, over {STALL_S * 1000:.0f} ms: {measures.stalls}, "
        f"longest: {measures.max_stall_s * 1000:.0f} ms",
        f"resident memory: baseline {measures.baseline_rss / 2**20:.0f} MiB, "
        f"peak {measures.peak_rss / 2**20:.0f} MiB, growth {measures.rss_growth / 2**20:.0f} MiB",
        *measures.notes,
        *(f"  {key}: {count}" for key, count in sorted(measures.answers.items())),
    ]
    return "\n".join(lines)


def against_targets(measures: Measures, after: str, runs: bool) -> list[tuple[str, bool]]:
    """Each figure against its target, and whether it is met. The stall's comes first: a
    timing on a shared machine, printed but not failed on."""
    stall_ms = measures.max_stall_s * 1000
    growth = measures.rss_growth / 2**20
    figures = [
        (
            f"longest /healthz {stall_ms:.0f} ms",
            f"{STALL_S * 1000:.0f} ms",
            stall_ms <= STALL_S * 1000,
        ),
        (
            f"memory growth {growth:.0f} MiB",
            f"{RSS_GROWTH_BYTES // 2**20} MiB",
            growth * 2**20 <= RSS_GROWTH_BYTES,
        ),
        (f"the process {'runs' if runs else 'EXITED'}", "runs", runs),
        (f"a write afterwards {after}", "204", after == "204"),
    ]
    return [
        (f"target {target:>7}: {figure} - {'met' if met else 'MISSED'}", met)
        for figure, target, met in figures
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="a Kafka broker to use (default: one of its own)")
    parser.add_argument("--nofile", type=int, default=NOFILE * 4)
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        home = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hostile-")))
        bootstrap = args.bootstrap or stack.enter_context(_broker(home))
        target = stack.enter_context(hostile_instance(bootstrap, home, args.nofile))
        measures = asyncio.run(run_shapes(target, FULL))
        after = asyncio.run(write_after(target))
        print(report(measures))
        verdicts = against_targets(measures, after, alive(target.pid))
        print("\n".join(line for line, _ in verdicts))
        failed = measures.server_errors() or not all(met for _, met in verdicts[1:])
        identity = stack.enter_context(IdentityProvider().serving())
        checked = stack.enter_context(jwt_instance(bootstrap, home, identity))
        started = time.monotonic()
        forged, fetched = asyncio.run(forged_kids(checked, identity, FULL))
        took = time.monotonic() - started
        signed = asyncio.run(signed_after(checked, identity))
        print(report(forged))
        print(f"a signed token afterwards: {signed}")
        failed = failed or bool(forged.server_errors()) or signed != "200"
        failed = failed or fetched > fetches_allowed(took) or not alive(checked.pid)
        traced = stack.enter_context(
            hostile_instance(bootstrap, home, args.nofile, tracing_endpoint=SILENT_COLLECTOR)
        )
        traces = asyncio.run(run_shapes(traced, FULL, [trace_contexts]))
        print(report(traces))
        copied = copied_traceparents(bootstrap, traced)
        print(f"tracing on: records whose traceparent is not one the instance made: {copied}")
        failed = failed or bool(traces.server_errors()) or bool(copied) or not alive(traced.pid)
        stall = max(measures.max_stall_s, forged.max_stall_s, traces.max_stall_s)
        print(json.dumps({"max_stall_ms": round(stall * 1000), "ok": not failed}))
        return 1 if failed else 0


@contextlib.contextmanager
def _broker(home: Path) -> Iterator[str]:
    from tests.services import kafka_broker

    with kafka_broker(home / "kafka") as bootstrap:
        yield bootstrap


if __name__ == "__main__":
    raise SystemExit(main())
