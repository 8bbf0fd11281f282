"""Several adapter processes on one topic prefix: their settings, who owns what, signals."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import aiohttp

from devstack.process import free_port
from tests.adapter_process import adapter_pid, running_adapter
from topology.placement import partition_for
from topology.slots import SlotMap

T = TypeVar("T")

SLOTS = 8
PARTITIONS = 12  # the default bucket's, created on demand by /v1/stream
TEXT = {"Content-Type": "text/plain"}


def cluster_env(bootstrap: str, prefix: str, tmp_path: Path) -> dict[str, str]:
    return {
        "DURABLE_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "DURABLE_KAFKA_TOPIC_PREFIX": prefix,
        "DURABLE_KAFKA_COLD_DIR": str(tmp_path / "cold"),
        "DURABLE_KAFKA_KAFKA_TIMEOUT_MS": "3000",
        "DURABLE_KAFKA_OWNER_SESSION_TIMEOUT_MS": "6000",
        "DURABLE_KAFKA_WRITE_SLOTS": str(SLOTS),
        "DURABLE_KAFKA_PARTITIONS": str(PARTITIONS),
    }


def slot_of(prefix: str, stream_id: str) -> int:
    """The write slot of `/v1/stream/{stream_id}` (a stream of the `_default` bucket)."""
    partition = partition_for(stream_id.encode(), PARTITIONS)
    return SlotMap(prefix, SLOTS).of_stream("_default", partition)


def stream_in(prefix: str, slots: set[int], stem: str) -> str:
    """A stream id `{stem}{i}` whose write slot is one of `slots`."""
    return next(f"{stem}{i}" for i in range(1000) if slot_of(prefix, f"{stem}{i}") in slots)


async def owned(
    session: aiohttp.ClientSession, base: str, settled: bool = False
) -> set[int] | None:
    """The slots an instance accepts writes for (from /readyz), None if it does not answer;
    `settled`: None as well while it would answer a write 503 (a slot's owner not known yet)."""
    try:
        async with session.get(f"{base}/readyz", timeout=aiohttp.ClientTimeout(total=2)) as r:
            ownership = (await r.json())["checks"]["ownership"]
    except (aiohttp.ClientError, TimeoutError, KeyError):
        return None
    slots = ownership.get("owned_slots")
    if slots is None or (settled and ownership.get("unroutable_slots") != []):
        return None  # not serving yet, or not every slot routable
    return {int(k) for k in slots}


async def until_owned(
    session: aiohttp.ClientSession, expected: dict[str, int | None], timeout_s: float = 60
) -> dict[str, set[int]]:
    """Wait until each instance owns `expected[base]` slots (None: at least one), the
    instances together own all of them and each knows every slot's owner (no write 503s)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while loop.time() < deadline:
        found = {base: await owned(session, base, settled=True) for base in expected}
        if all(slots is not None for slots in found.values()):
            split = {base: slots or set() for base, slots in found.items()}
            total = set().union(*split.values())
            counts_ok = all(
                len(split[base]) == want if want is not None else bool(split[base])
                for base, want in expected.items()
            )
            if counts_ok and len(total) == SLOTS:
                return split
        await asyncio.sleep(0.2)
    raise AssertionError(f"slots never settled as {expected}")


async def until_read(read: Callable[[], Awaitable[T]], want: T, timeout_s: float = 10) -> T:
    """`read()` again until it answers `want` or `timeout_s` has passed; its last answer. An
    instance that is not a stream's owner shows another's writes once its follower has
    applied them (typically within 0.2 s)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        answer = await read()
        if answer == want or asyncio.get_running_loop().time() > deadline:
            return answer
        await asyncio.sleep(0.05)


async def past_moves(
    session: aiohttp.ClientSession, method: str, url: str, within_s: float = 30, **kwargs: Any
) -> tuple[int, bytes]:
    """(status, body) of a write sent again while the answer is 503 (a write slot changing
    owner: nothing was written), after its `Retry-After` (at most 1 s), as a client does: an
    owners' group can move a slot again after start-up on a loaded machine."""
    deadline = asyncio.get_running_loop().time() + within_s
    while True:
        async with session.request(method, url, raise_for_status=False, **kwargs) as reply:
            status, body = reply.status, await reply.read()
            wait = min(float(reply.headers.get("Retry-After", "1")), 1.0)
        if status != 503 or asyncio.get_running_loop().time() > deadline:
            return status, body
        await asyncio.sleep(wait)


def signal_adapter(port: int, sig: signal.Signals) -> None:
    os.kill(adapter_pid(port), sig)


@dataclass(frozen=True)
class Pair:
    """Two adapter processes on one prefix, both serving, the slots split between them."""

    session: aiohttp.ClientSession
    a: str
    b: str
    owners: dict[str, set[int]]


@asynccontextmanager
async def two_instances(
    bootstrap: str,
    prefix: str,
    tmp_path: Path,
    total_s: float = 30,
    env: Mapping[str, str] | None = None,
) -> AsyncIterator[Pair]:
    """Instances `a` and `b` (logs `a.log`, `b.log` in `tmp_path`) once each owns slots;
    `env` adds to (or overrides) their settings."""
    env = cluster_env(bootstrap, prefix, tmp_path) | dict(env or {})
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=total_s)) as session:
        with (
            running_adapter(env, tmp_path / "a.log", free_port()) as a,
            running_adapter(env, tmp_path / "b.log", free_port()) as b,
        ):
            yield Pair(session, a, b, await until_owned(session, {a: None, b: None}))
