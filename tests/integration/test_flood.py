"""A flood: appends at 3x the rate limit, half of the time with the
broker paused (SIGSTOP). Only 2xx, 429 and 503 are seen, every 429 and 503 with
`Retry-After`; the adapter's resident memory stays under `max_memory_bytes`; the rate let
through is the configured one within 10%; and exactly the appends answered 2xx are in the
stream (a 5xx means not written). Loopback only, bounded in time: a private broker (it is
paused, so no other test may share it) and the adapter as a child process (its RSS is its own).

The rate let through is compared with what a token bucket of the configured rate and burst
lets through for the arrival times the adapter logged (each request's log time less its
duration), not for the times the test meant to send at: a loaded machine stalls the sender
and the adapter for seconds, and a rate limiter cannot let through what did not arrive.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from aiohttp import ClientSession, ClientTimeout, TCPConnector

from devstack import kafka
from devstack.process import free_port
from tests.adapter_process import adapter_pid, running_adapter
from tests.services import DISCARD_S

RATE = 30  # appends per second let through
# Two seconds' worth: a stall of the loaded test machine shorter than that loses no tokens.
BURST = 2 * RATE
FLOOD_RATE = 3 * RATE
PHASE_S = 2.0  # broker up, then paused, as long
BODY = b"f" * 16 * 1024
MEMORY_CAP = 384 * 1024 * 1024
OCTETS = {"Content-Type": "application/octet-stream"}


@pytest.fixture(scope="module")
def private_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[kafka.KafkaNode]:
    node = kafka.KafkaNode(
        home=tmp_path_factory.mktemp("flood-kafka"), port=free_port(), controller_port=free_port()
    )
    kafka.start(node)
    try:
        yield node
    finally:
        kafka.stop(node, DISCARD_S)


@contextlib.contextmanager
def paused(node: kafka.KafkaNode) -> Iterator[None]:
    pid = node.process.pid()
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def _rss(pid: int) -> int:
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# A broker of its own starts two JVMs (format, then serve): slow on a loaded machine.
@pytest.mark.timeout(300)
async def test_a_flood_with_the_broker_paused(
    private_broker: kafka.KafkaNode, tmp_path: Path
) -> None:
    port = free_port()
    env = {
        "DURABLE_KAFKA_BOOTSTRAP_SERVERS": private_broker.bootstrap_servers,
        "DURABLE_KAFKA_TOPIC_PREFIX": f"fl{uuid.uuid4().hex[:10]}.",
        "DURABLE_KAFKA_COLD_DIR": str(tmp_path / "cold"),
        "DURABLE_KAFKA_PARTITIONS": "1",
        "DURABLE_KAFKA_WRITE_SLOTS": "1",
        "DURABLE_KAFKA_KAFKA_TIMEOUT_MS": "1000",
        "DURABLE_KAFKA_RATE_LIMIT_REQUESTS": str(RATE),
        "DURABLE_KAFKA_RATE_LIMIT_BURST": str(BURST),
        "DURABLE_KAFKA_MAX_MEMORY_BYTES": str(MEMORY_CAP),
    }
    log = tmp_path / "adapter.log"
    with running_adapter(env, log, port) as url:
        pid = adapter_pid(port)
        connector = TCPConnector(limit=0)  # every request on the wire when it is due
        timeout = ClientTimeout(total=60)
        async with ClientSession(url, connector=connector, timeout=timeout) as session:
            async with session.put("/flood") as made:
                assert made.status == 201
            async with session.put("/flood/s", headers=OCTETS) as made:
                assert made.status == 201
            await asyncio.sleep(0.2)  # the set-up's 2 tokens back: the flood starts at the burst
            answers, rss = await _flood(session, private_broker, pid)
            stored = await _read_all(session, "/flood/s")
    statuses = [status for status, _ in answers]
    assert set(statuses) <= {200, 204, 429, 503}, sorted(set(statuses))
    assert all(retry for status, retry in answers if status in (429, 503))
    assert 429 in statuses
    assert max(rss) < MEMORY_CAP
    let_through = sum(status != 429 for status in statuses)
    expected = _token_bucket(_arrivals(log))
    assert abs(let_through - expected) <= 0.1 * expected, (let_through, expected)
    written = sum(status in (200, 204) for status in statuses)
    assert len(stored) == len(BODY) * written  # a 503 was not written


def _arrivals(log: Path) -> list[tuple[float, bool]]:
    """Each request to the bucket as the adapter logged it: (arrival in seconds, whether it
    is one of the flood's appends), in arrival order."""
    arrivals = []
    for line in log.read_text().splitlines():
        if '"durable_kafka.requests"' not in line:
            continue
        entry = json.loads(line)
        if not entry["route"].startswith("/{bucket}"):
            continue  # /healthz, /readyz: not rate-limited
        answered = datetime.strptime(entry["time"], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        flood = entry["method"] == "POST"
        arrivals.append((answered - entry["duration_ms"] / 1000, flood))
    return sorted(arrivals)


def _token_bucket(arrivals: list[tuple[float, bool]]) -> int:
    """How many of the flood's appends a bucket of RATE per second up to BURST lets in."""
    tokens, last, let_in = float(BURST), arrivals[0][0], 0
    for at, flood in arrivals:
        tokens = min(BURST, tokens + (at - last) * RATE)
        last = at
        if tokens >= 1:
            tokens -= 1
            let_in += flood
    return let_in


async def _read_all(session: ClientSession, path: str) -> bytes:
    """The stream from its start to its tail (a read answers one chunk at most)."""
    data, offset = b"", "-1"
    while True:
        async with session.get(path, params={"offset": offset}) as read:
            assert read.status == 200
            data += await read.read()
            offset = read.headers["Stream-Next-Offset"]
            if read.headers.get("Stream-Up-To-Date") == "true":
                return data


async def _flood(
    session: ClientSession, broker: kafka.KafkaNode, pid: int
) -> tuple[list[tuple[int, bool]], list[int]]:
    """Appends at FLOOD_RATE for 2 phases (the broker up, then paused); their answers (status,
    whether `Retry-After` came) and the adapter's RSS as sampled meanwhile."""
    rss: list[int] = []
    sent: list[asyncio.Task[tuple[int, bool]]] = []

    async def append() -> tuple[int, bool]:
        async with session.post("/flood/s", data=BODY, headers=OCTETS) as answer:
            await answer.read()
            return answer.status, "Retry-After" in answer.headers

    loop = asyncio.get_running_loop()
    started = loop.time()
    for phase in range(2):
        with paused(broker) if phase else contextlib.nullcontext():
            phase_end = started + PHASE_S * (phase + 1)
            while (now := loop.time()) < phase_end:
                due = int((now - started) * FLOOD_RATE) + 1
                sent.extend(asyncio.create_task(append()) for _ in range(due - len(sent)))
                rss.append(_rss(pid))
                await asyncio.sleep(0.02)
    answers = await asyncio.gather(*sent)
    rss.append(_rss(pid))
    return answers, rss
