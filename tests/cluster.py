"""Several adapter processes on one topic prefix: their settings, who owns what, signals."""

from __future__ import annotations

import asyncio
import functools
import itertools
import os
import re
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from adapter.protocol.identifiers import DEFAULT_BUCKET
from devstack.process import free_port
from tests.adapter_process import adapter_pid, running_adapter
from topology.placement import partition_for
from topology.slots import SlotMap

T = TypeVar("T")

SLOTS = 8
PARTITIONS = 12  # each bucket's at least (`_default`'s is created on demand by /v1/stream)
OWNER_SESSION_MS = 6000  # the owners' group session: a dead instance's slots move after it
TEXT = {"Content-Type": "text/plain"}


def cluster_env(bootstrap: str, prefix: str, tmp_path: Path) -> dict[str, str]:
    return {
        "DURABLE_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "DURABLE_KAFKA_TOPIC_PREFIX": prefix,
        "DURABLE_KAFKA_COLD_DIR": str(tmp_path / "cold"),
        "DURABLE_KAFKA_KAFKA_TIMEOUT_MS": "3000",
        "DURABLE_KAFKA_OWNER_SESSION_TIMEOUT_MS": str(OWNER_SESSION_MS),
        "DURABLE_KAFKA_WRITE_SLOTS": str(SLOTS),
        "DURABLE_KAFKA_PARTITIONS": str(partitions(prefix)),
    }


@functools.cache
def partitions(prefix: str) -> int:
    """The partitions of each bucket of the instances on `prefix`: `PARTITIONS`, or more when
    those of `_default` are not written by every slot. A partition's slot is a hash of its topic
    (so of the prefix) and index: with 12 partitions over 8 slots, about one prefix in five
    leaves a slot without any stream of `_default`, which `stream_in` could then not find."""
    slots = SlotMap(prefix, SLOTS)
    count, reached = 0, set[int]()
    while count < PARTITIONS or len(reached) < SLOTS:
        reached.add(slots.of_stream(DEFAULT_BUCKET, count))
        count += 1
    return count


def slot_of(prefix: str, stream_id: str, bucket: str = DEFAULT_BUCKET) -> int:
    """The write slot of `stream_id` of `bucket` (`/v1/stream/{stream_id}` by default)."""
    partition = partition_for(stream_id.encode(), partitions(prefix))
    return SlotMap(prefix, SLOTS).of_stream(bucket, partition)


def stream_in(prefix: str, slots: set[int], stem: str) -> str:
    """A stream id `{stem}{i}` of `_default` whose write slot is one of `slots` (not empty):
    every slot writes some of `_default`'s partitions (`partitions`)."""
    if not slots:
        raise ValueError("a stream is in some slot: none given")
    return next(f"{stem}{i}" for i in itertools.count() if slot_of(prefix, f"{stem}{i}") in slots)


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
    env_b: Mapping[str, str] | None = None,
) -> AsyncIterator[Pair]:
    """Instances `a` and `b` (logs `a.log`, `b.log` in `tmp_path`) once each owns slots;
    `env` adds to (or overrides) their settings, `env_b` to `b`'s alone."""
    env = cluster_env(bootstrap, prefix, tmp_path) | dict(env or {})
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=total_s)) as session:
        with (
            running_adapter(env, tmp_path / "a.log", free_port()) as a,
            running_adapter(env | dict(env_b or {}), tmp_path / "b.log", free_port()) as b,
        ):
            yield Pair(session, a, b, await until_owned(session, {a: None, b: None}))


@dataclass(frozen=True)
class Trio:
    """Three adapter processes on one prefix, all serving, each owning slots."""

    session: aiohttp.ClientSession
    logs: dict[str, Path]  # each instance's base URL: its log
    owners: dict[str, set[int]]

    def owner_and_others(self, prefix: str, stream_id: str) -> tuple[str, tuple[str, str]]:
        """The instance owning `stream_id`'s slot (of `_default`), and the other two."""
        slot = slot_of(prefix, stream_id)
        owner = next(base for base, slots in self.owners.items() if slot in slots)
        first, second = (base for base in self.owners if base != owner)
        return owner, (first, second)

    def logged(self) -> str:
        """What every instance logged so far."""
        return "".join(log.read_text() for log in self.logs.values())


@asynccontextmanager
async def three_instances(
    bootstrap: str,
    prefix: str,
    tmp_path: Path,
    total_s: float = 60,
    env: Mapping[str, str] | None = None,
    each: Sequence[Mapping[str, str]] = (),
) -> AsyncIterator[Trio]:
    """Three instances (logs `0.log`, `1.log`, `2.log` in `tmp_path`) once each owns slots;
    `env` adds to (or overrides) their settings, `each[i]` to those of the `i`-th alone (the
    order of `Trio.logs`)."""
    env = cluster_env(bootstrap, prefix, tmp_path) | dict(env or {})
    envs = [env | dict(each[i] if i < len(each) else {}) for i in range(3)]
    logs = [tmp_path / f"{i}.log" for i in range(3)]
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=total_s)) as session:
        with (
            running_adapter(envs[0], logs[0], free_port()) as first,
            running_adapter(envs[1], logs[1], free_port()) as second,
            running_adapter(envs[2], logs[2], free_port()) as third,
        ):
            bases = (first, second, third)
            owners = await until_owned(session, dict.fromkeys(bases))
            yield Trio(session, dict(zip(bases, logs, strict=True)), owners)


OPS_URL = re.compile(r"ops listener on (http://127\.0\.0\.1:\d+)")


def ops_url(log: Path) -> str:
    """The ops listener's URL of the instance that wrote `log`."""
    found = OPS_URL.findall(log.read_text())
    assert len(found) == 1, f"no single ops listener in {log}: {found}"
    return str(found[0])


async def sample(
    session: aiohttp.ClientSession, log: Path, name: str, labels: Mapping[str, str]
) -> float:
    """The value of metric sample `name{labels}` on the instance that wrote `log` (its ops
    listener's URL is in it); 0 when it has no such sample."""
    return await sample_at(session, ops_url(log), name, labels)


async def sample_at(
    session: aiohttp.ClientSession, ops: str, name: str, labels: Mapping[str, str]
) -> float:
    """`sample` from the ops listener at `ops`."""
    async with session.get(f"{ops}/metrics") as reply:
        assert reply.status == 200
        text = await reply.text()
    for family in text_string_to_metric_families(text):
        for found in family.samples:
            if found.name == name and found.labels == dict(labels):
                return float(found.value)
    return 0.0
