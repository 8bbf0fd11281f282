"""An owner whose process is gone gives its slots up as soon as a peer's forward finds its
address refusing connections; one paused answers nothing for `owner_unanswered_ms` before its
peers take its slots, and once resumed it is fenced and writes nothing; one paused for less
keeps them."""

from __future__ import annotations

import asyncio
import functools
import signal
import time
from pathlib import Path

import aiohttp
import pytest

from tests.cluster import (
    TEXT,
    Trio,
    owned,
    partitions,
    past_moves,
    sample,
    signal_adapter,
    slot_of,
    stream_in,
    three_instances,
    two_instances,
    until_owned,
    until_read,
)
from tests.integration.test_tiering import log_start
from tests.kafka_reads import committed_messages
from tests.services import S3Server
from topology.naming import bucket_topic
from topology.placement import partition_for
from topology.wire import decode_token, is_control

pytestmark = [pytest.mark.integration, pytest.mark.faults]

EVICTED = "removing it from the owners' group"  # what an instance logs when it evicts a peer
EVICTIONS = "durable_kafka_owner_evictions_total"
CHECKS = "durable_kafka_owner_eviction_checks_total"
# The paused owner's test: a session far longer than the bound, so that only an eviction moves
# its slots while it is paused.
UNANSWERED_MS = 2000
PAUSED_SESSION_MS = 20_000
PAUSED_S = 3.0  # within the owners' session (6 s in tests/cluster.py)
ATTEMPT_S = 3.0  # a client's patience for one try of a write
PATIENT_S = 40.0  # a client that waits for the answer, whatever the owner does meanwhile
STREAM = "s"  # written through another instance than its slot's owner
# Two peers checking one paused owner: the later one's bound ends long after the first's
# removal is through (a child process joining and leaving the group: seconds on a loaded
# machine), and the owner's session after both.
LATER_UNANSWERED_MS = 15_000
LATER_SESSION_MS = 60_000
CHECKED_S = 60.0  # how long the later check may take to end, at most


def _port(base: str) -> int:
    return int(base.rsplit(":", 1)[1])


async def _try(
    session: aiohttp.ClientSession, url: str, body: str, patience_s: float = ATTEMPT_S
) -> int:
    """One try of an append: its status, 0 if it did not answer in time."""
    try:
        timeout = aiohttp.ClientTimeout(total=patience_s)
        async with session.post(url, data=body, headers=TEXT, timeout=timeout) as reply:
            return reply.status
    except (aiohttp.ClientError, TimeoutError):
        return 0


async def _until_written(session: aiohttp.ClientSession, url: str, within_s: float) -> int:
    """Try an append again, 0.1 s after each failed try, until one is written; its status."""
    deadline = time.monotonic() + within_s
    while True:
        status = await _try(session, url, "x")
        if status == 204 or time.monotonic() > deadline:
            return status
        await asyncio.sleep(0.1)


async def _evictions(trio: Trio, base: str, signal_name: str) -> float:
    """Owners' group members the instance at `base` removed on `signal_name`."""
    return await sample(trio.session, trio.logs[base], EVICTIONS, {"signal": signal_name})


async def _checks(trio: Trio, base: str, signal_name: str, outcome: str) -> float:
    """Checks of a suspected owner the instance at `base` ended with `outcome`."""
    labels = {"signal": signal_name, "outcome": outcome}
    return await sample(trio.session, trio.logs[base], CHECKS, labels)


async def _until_checked(trio: Trio, base: str, signal_name: str) -> float:
    """Until the instance at `base` has ended a check on `signal_name`, whatever its outcome
    (at most `CHECKED_S`); how many it ended."""
    deadline = time.monotonic() + CHECKED_S
    while True:
        ended = 0.0
        for outcome in ("evicted", "alive", "failed", "already"):
            ended += await _checks(trio, base, signal_name, outcome)
        if ended or time.monotonic() > deadline:
            return ended
        await asyncio.sleep(0.5)


def _appended(bootstrap: str, prefix: str, stream_id: str) -> list[str]:
    """The bodies appended to `stream_id` (of `_default`), as a fresh read_committed consumer
    of its partition reads them."""
    topic = bucket_topic(prefix, "_default")
    partition = partition_for(stream_id.encode(), partitions(prefix))
    return [
        (message.value() or b"").decode()
        for message in committed_messages(bootstrap, topic, partition)
        if message.key() == stream_id.encode() and not is_control(message.headers() or [])
    ]


@pytest.mark.timeout(240)
async def test_writes_to_a_killed_owners_slot_go_through_another_instance_soon(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    prefix = f"dead{unique}."
    async with three_instances(kafka_bootstrap, prefix, tmp_path) as trio:
        session = trio.session
        a, (b, c) = trio.owner_and_others(prefix, STREAM)
        url = f"{b}/v1/stream/{STREAM}"
        assert await past_moves(session, "PUT", url, headers=TEXT) == (201, b"")
        assert await _try(session, url, "x") == 204  # forwarded to `a`
        killed = time.monotonic()
        signal_adapter(_port(a), signal.SIGKILL)
        status = await _until_written(session, url, within_s=60)
        took = time.monotonic() - killed
        # Measured, not asserted (a loaded machine may take longer): see the docs.
        print(f"\nkill -9 of an owner: its slot accepted a write through a peer {took:.1f}s later")
        assert status == 204
        after = await until_owned(session, {b: None, c: None})
        assert set().union(*after.values()) >= trio.owners[a]
        assert EVICTED in trio.logged()
        assert await _evictions(trio, b, "refused") == 1  # its member found, and removed


@pytest.mark.timeout(240)
async def test_a_paused_owner_is_evicted_fenced_and_writes_nothing_once_resumed(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    prefix = f"paused{unique}."
    env = {
        "DURABLE_KAFKA_OWNER_UNANSWERED_MS": str(UNANSWERED_MS),
        "DURABLE_KAFKA_OWNER_SESSION_TIMEOUT_MS": str(PAUSED_SESSION_MS),
    }
    async with three_instances(kafka_bootstrap, prefix, tmp_path, env=env) as trio:
        session = trio.session
        a, (b, _c) = trio.owner_and_others(prefix, STREAM)
        owner, through = f"{a}/v1/stream/{STREAM}", f"{b}/v1/stream/{STREAM}"
        assert await past_moves(session, "PUT", through, headers=TEXT) == (201, b"")
        statuses = {"before,": await _try(session, owner, "before,")}
        # Appends the owner holds when it stops, some in a transaction not yet committed.
        held = [f"held{i}," for i in range(10)]
        holding = [asyncio.create_task(_try(session, owner, t, PATIENT_S)) for t in held]
        await asyncio.sleep(0.02)
        signal_adapter(_port(a), signal.SIGSTOP)
        paused = time.monotonic()
        try:
            statuses["during,"] = await _try(session, through, "during,", PATIENT_S)
            took = time.monotonic() - paused
            evicted = await _evictions(trio, b, "unanswered")
        finally:
            signal_adapter(_port(a), signal.SIGCONT)
        # Measured, not asserted (a loaded machine may take longer): see the docs.
        print(f"\nSIGSTOP of an owner: its slot accepted a write through a peer {took:.1f}s later")
        statuses |= dict(zip(held, await asyncio.gather(*holding), strict=True))
        statuses["after,"] = await _try(session, through, "after,", PATIENT_S)
        print(f"answers: {statuses}")
        assert (statuses["before,"], statuses["during,"], statuses["after,"]) == (204,) * 3
        assert evicted == 1  # by the peer its forward went through
        # Resumed, it finds its membership gone (its slots lost) and its writers fenced.
        assert "lost write slots" in trio.logs[a].read_text()
        assert await until_owned(session, dict.fromkeys(trio.owners))  # a rejoined
        appended = await asyncio.to_thread(_appended, kafka_bootstrap, prefix, STREAM)
        acknowledged = {body for body, status in statuses.items() if status == 204}
        assert len(appended) == len(set(appended)), appended  # nothing twice
        # Every acknowledged append, and none that the resumed owner answered otherwise: it
        # was fenced before it could commit them.
        assert set(appended) == acknowledged, (appended, statuses)


@pytest.mark.timeout(240)
async def test_an_owner_paused_less_than_the_bound_is_not_evicted(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    prefix = f"slow{unique}."
    env = {"DURABLE_KAFKA_OWNER_UNANSWERED_MS": str(int(PAUSED_S * 2000))}
    async with two_instances(kafka_bootstrap, prefix, tmp_path, 60, env) as pair:
        session = pair.session
        logs = {pair.a: tmp_path / "a.log", pair.b: tmp_path / "b.log"}
        a, b = (
            (pair.a, pair.b) if slot_of(prefix, STREAM) in pair.owners[pair.a] else (pair.b, pair.a)
        )
        url = f"{b}/v1/stream/{STREAM}"
        assert await past_moves(session, "PUT", url, headers=TEXT) == (201, b"")
        signal_adapter(_port(a), signal.SIGSTOP)
        try:
            # Forwards to the paused owner: connections accepted, no answer yet.
            stuck = [asyncio.create_task(_try(session, url, f"{i},", 30)) for i in range(5)]
            await asyncio.sleep(PAUSED_S)
        finally:
            signal_adapter(_port(a), signal.SIGCONT)
        statuses = await asyncio.gather(*stuck)
        assert await owned(session, a) == pair.owners[a]  # no takeover
        assert EVICTED not in logs[a].read_text() + logs[b].read_text()
        checked = {"signal": "unanswered", "outcome": "alive"}
        assert await sample(session, logs[b], CHECKS, checked) >= 1  # checked, and declined
        assert statuses == [204] * 5  # answered by the owner once it resumed


@pytest.mark.timeout(240)
async def test_a_paused_owner_two_peers_check_is_evicted_once_and_the_later_check_says_so(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    """Both peers forward to the paused owner; the one with the shorter bound removes it, the
    other, checking on, finds no member left at its address: the owner is out of the group,
    so its check is counted `already`, not `failed`."""
    prefix = f"twice{unique}."
    # The owner is the first instance; the second evicts it, the third's bound ends well after.
    each = [{}, {"DURABLE_KAFKA_OWNER_UNANSWERED_MS": str(UNANSWERED_MS)}]
    each += [{"DURABLE_KAFKA_OWNER_UNANSWERED_MS": str(LATER_UNANSWERED_MS)}]
    env = {"DURABLE_KAFKA_OWNER_SESSION_TIMEOUT_MS": str(LATER_SESSION_MS)}
    async with three_instances(kafka_bootstrap, prefix, tmp_path, env=env, each=each) as trio:
        session = trio.session
        a, b, c = trio.logs
        stream = next(
            s for s in (f"s{i}" for i in range(1000)) if slot_of(prefix, s) in trio.owners[a]
        )
        assert await past_moves(session, "PUT", f"{b}/v1/stream/{stream}", headers=TEXT) == (
            201,
            b"",
        )
        signal_adapter(_port(a), signal.SIGSTOP)
        try:
            # A forward through each peer, both left unanswered by the paused owner.
            forwards = [
                asyncio.create_task(_try(session, f"{peer}/v1/stream/{stream}", f"{n},", PATIENT_S))
                for n, peer in enumerate((b, c))
            ]
            ended = await _until_checked(trio, c, "unanswered")
        finally:
            signal_adapter(_port(a), signal.SIGCONT)
        await asyncio.gather(*forwards)
        outcomes = {o: await _checks(trio, c, "unanswered", o) for o in ("evicted", "failed")}
        outcomes["already"] = await _checks(trio, c, "unanswered", "already")
        print(f"\nthe later peer's checks: {outcomes}")
        assert ended >= 1
        assert await _evictions(trio, b, "unanswered") == 1  # removed once, by `b`
        assert await _evictions(trio, c, "unanswered") == 0
        assert outcomes == {"evicted": 0, "failed": 0, "already": 1}


@pytest.mark.timeout(240)
async def test_an_append_to_a_quiet_stream_forwarded_to_a_paused_owner_goes_through_a_new_owner(
    kafka_bootstrap: str, unique: str, tmp_path: Path, s3: S3Server
) -> None:
    """A quiet stream, written once, shares its partition with a busy one, and its owner's
    tier passes freed every record there was: the quiet stream's tail lies below Kafka's log
    start, none of its records freed past it. An append to it through the peer, forwarded to
    the owner once it is paused, goes through the slot's new owner (204), not 504: the search
    for it from the log start is the whole answer, as the stream's metadata shows its tail
    where it was (an owner checkpoints every stream of a range before freeing it)."""
    prefix = f"quiet{unique}."
    env = {
        "DURABLE_KAFKA_OWNER_UNANSWERED_MS": str(UNANSWERED_MS),
        "DURABLE_KAFKA_OWNER_SESSION_TIMEOUT_MS": str(PAUSED_SESSION_MS),
        "DURABLE_KAFKA_COLD_BACKEND": "s3",
        "DURABLE_KAFKA_S3_ENDPOINT_URL": s3.endpoint_url,
        "DURABLE_KAFKA_S3_ACCESS_KEY_ID": s3.access_key_id,
        "DURABLE_KAFKA_S3_SECRET_ACCESS_KEY": s3.secret_access_key,
        "DURABLE_KAFKA_S3_BUCKET": f"quiet-{unique}",
        "DURABLE_KAFKA_TIER_AFTER_BYTES": "0",
        "DURABLE_KAFKA_TIER_AFTER_MS": "0",
        "DURABLE_KAFKA_TIER_INTERVAL_MS": "200",
    }
    async with two_instances(kafka_bootstrap, prefix, tmp_path, 60, env=env) as pair:
        session, (owner, peer) = pair.session, (pair.b, pair.a)
        quiet = stream_in(prefix, pair.owners[owner], "q")
        count = partitions(prefix)
        partition = partition_for(quiet.encode(), count)
        busy = next(
            name
            for name in (f"busy{i}" for i in range(10_000))
            if partition_for(name.encode(), count) == partition
        )
        for stream in (quiet, busy):
            url = f"{owner}/v1/stream/{stream}"
            assert await past_moves(session, "PUT", url, headers=TEXT) == (201, b"")
        async with session.post(f"{owner}/v1/stream/{quiet}", data="q", headers=TEXT) as reply:
            assert reply.status == 204, await reply.text()
            tail = decode_token(reply.headers["Stream-Next-Offset"])
        for _ in range(5):
            assert await _try(session, f"{owner}/v1/stream/{busy}", "b") == 204
        topic = bucket_topic(prefix, "_default")
        deadline = time.monotonic() + 60
        while (await asyncio.to_thread(log_start, kafka_bootstrap, topic, partition))[0] <= tail:
            assert time.monotonic() < deadline, "the owner's tier passes freed nothing"
            await asyncio.sleep(0.2)
        signal_adapter(_port(owner), signal.SIGSTOP)
        try:
            status = await _try(session, f"{peer}/v1/stream/{quiet}", "x", PATIENT_S)
        finally:
            signal_adapter(_port(owner), signal.SIGCONT)
        assert status == 204
        # Once, through both: the resumed owner reads it from Kafka or the cold tier (the new
        # owner's tier passes go on freeing), not from a cache of its own.
        for base in (peer, owner):
            read = functools.partial(_read, session, f"{base}/v1/stream/{quiet}?offset=-1")
            assert await until_read(read, b"qx", 30) == b"qx"


async def _read(session: aiohttp.ClientSession, url: str) -> bytes:
    """A read's body, or its status when not 200."""
    async with session.get(url) as reply:
        return await reply.read() if reply.status == 200 else str(reply.status).encode()
