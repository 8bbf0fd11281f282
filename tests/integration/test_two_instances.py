"""Two adapter processes on one topic prefix: kill -9 of a slot owner (with and without a
restart), and a resumed zombie."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import aiohttp
import pytest

from devstack.process import free_port
from tests.adapter_process import running_adapter
from tests.cluster import (
    SLOTS,
    TEXT,
    cluster_env,
    owned,
    signal_adapter,
    slot_of,
    stream_in,
    two_instances,
    until_owned,
    until_read,
)
from topology.slots import SlotMap

pytestmark = [pytest.mark.integration, pytest.mark.faults]

STREAMS = [f"busy{i}" for i in range(4)]
PRODUCERS_PER_STREAM = 2
APPENDS = 40  # per producer


async def _produce(
    session: aiohttp.ClientSession, bases: list[str], stream: str, pid: str, acked: list[int]
) -> None:
    """Send seq 0..APPENDS-1 in order, each attempt through the next instance, until acked."""
    for seq in range(APPENDS):
        headers = {**TEXT, "Producer-Id": pid, "Producer-Epoch": "0", "Producer-Seq": str(seq)}
        attempt = 0
        while True:
            base, status = bases[(seq + attempt) % len(bases)], 0
            try:
                url = f"{base}/v1/stream/{stream}"
                async with session.post(url, data=f"{pid}:{seq}\n", headers=headers) as reply:
                    status = reply.status
                    assert status in (200, 204, 503), (status, await reply.text())
            except (aiohttp.ClientConnectionError, TimeoutError):
                pass  # that instance is gone: the next attempt goes to the other one
            if status in (200, 204):
                acked.append(seq)
                break
            attempt += 1
            await asyncio.sleep(0.05)


async def _read(session: aiohttp.ClientSession, base: str, stream: str) -> str:
    async with session.get(f"{base}/v1/stream/{stream}", params={"offset": "-1"}) as reply:
        assert reply.status == 200, await reply.text()
        return await reply.text()


def _port(base: str) -> int:
    return int(base.rsplit(":", 1)[1])


@pytest.mark.timeout(300)
async def test_kill_9_of_an_owner_moves_its_slots_and_loses_nothing(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    prefix = f"two{unique}."
    env = cluster_env(kafka_bootstrap, prefix, tmp_path)
    acked_lists: dict[tuple[str, str], list[int]] = {
        (s, f"{s}-p{i}"): [] for s in STREAMS for i in range(PRODUCERS_PER_STREAM)
    }
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        with (
            running_adapter(env, tmp_path / "a.log", free_port()) as a,
            running_adapter(env, tmp_path / "b.log", free_port()) as b,
        ):
            owners = await until_owned(session, {a: None, b: None})
            for stream in STREAMS:  # created through one instance: some are forwarded
                async with session.put(f"{a}/v1/stream/{stream}", headers=TEXT) as reply:
                    assert reply.status == 201, await reply.text()
            load = [
                asyncio.create_task(_produce(session, [a, b], stream, pid, seqs))
                for (stream, pid), seqs in acked_lists.items()
            ]
            total = len(acked_lists) * APPENDS
            for _ in range(3000):
                if sum(len(seqs) for seqs in acked_lists.values()) >= total // 3:
                    break
                await asyncio.sleep(0.02)
            victim = a if slot_of(prefix, STREAMS[0]) in owners[a] else b
            survivor = b if victim == a else a
            signal_adapter(_port(victim), signal.SIGKILL)  # mid-load, transactions open
            await asyncio.wait_for(asyncio.gather(*load), 240)
            await until_owned(session, {survivor: 8})
            bodies = {stream: await _read(session, survivor, stream) for stream in STREAMS}
    for (stream, pid), seqs in acked_lists.items():
        assert seqs == list(range(APPENDS))
        lines = bodies[stream].splitlines()
        mine = [int(line.split(":")[1]) for line in lines if line.startswith(f"{pid}:")]
        assert mine == list(range(APPENDS))  # every acknowledged append once, in order


async def _post(session: aiohttp.ClientSession, base: str, stream: str, text: str) -> int:
    try:
        async with session.post(f"{base}/v1/stream/{stream}", data=text, headers=TEXT) as r:
            return r.status
    except (aiohttp.ClientConnectionError, TimeoutError):
        return 0


@pytest.mark.timeout(300)
async def test_a_resumed_zombie_never_applies_a_write(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    prefix = f"zombie{unique}."
    async with two_instances(kafka_bootstrap, prefix, tmp_path, total_s=60) as pair:
        session, a, b, owners = pair.session, pair.a, pair.b, pair.owners
        stream = stream_in(prefix, owners[a], "z")
        assert (await session.put(f"{a}/v1/stream/{stream}", headers=TEXT)).status == 201
        if await _post(session, a, stream, "a0\n") != 204:  # A writes as the owner
            raise AssertionError("the owner refused a plain append")
        # Appends in flight at A when it stops: some inside an open transaction.
        bodies = [f"inflight{i}\n" for i in range(20)]
        in_flight = [asyncio.create_task(_post(session, a, stream, t)) for t in bodies]
        await asyncio.sleep(0.02)
        signal_adapter(_port(a), signal.SIGSTOP)
        try:
            # Sent to the stopped owner: it can only be handled once A resumes.
            late = asyncio.create_task(_post(session, a, stream, "zombie1\n"))
            await until_owned(session, {b: 8})  # A's session timed out: B fenced it
            assert await _post(session, b, stream, "b1\n") == 204
        finally:
            signal_adapter(_port(a), signal.SIGCONT)
        zombie2 = await _post(session, a, stream, "zombie2\n")
        answers = await asyncio.gather(*in_flight, late)
        statuses = dict(zip([*bodies, "zombie1\n"], answers, strict=True))
        statuses["zombie2\n"] = zombie2
        assert set(statuses.values()) <= {0, 204, 503}, statuses
        # A rejoins the group: B may answer 503 (nothing written) while slots move back.
        await until_owned(session, {a: None, b: None})
        assert await _post(session, b, stream, "b2\n") == 204
        through_b = await _read(session, b, stream)
        # A's catalog caught up (when B kept the stream, once A's follower applied b2).
        assert await until_read(lambda: _read(session, a, stream), through_b) == through_b
    lines = through_b.splitlines(keepends=True)
    assert len(lines) == len(set(lines))  # nothing twice
    acknowledged = {text for text, status in statuses.items() if status == 204}
    assert set(lines) == {"a0\n", "b1\n", "b2\n"} | acknowledged  # none that failed
    assert lines[0] == "a0\n"
    assert lines.index("b1\n") < lines.index("b2\n")
    assert "lost write slots" in (tmp_path / "a.log").read_text()  # A saw it was replaced


@pytest.mark.timeout(300)
async def test_a_fork_made_through_one_instance_takes_appends_through_the_other_at_once(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    """A fork lives in its source's slot, not the one its own id hashes to: an instance that
    has not followed the fork's creation yet must catch up before routing an append to it,
    not route it by the fork's id (to itself here: 404)."""
    prefix = f"forkroute{unique}."
    async with two_instances(kafka_bootstrap, prefix, tmp_path, total_s=60) as pair:
        session, a, b = pair.session, pair.a, pair.b
        source = stream_in(prefix, pair.owners[b], "src")  # B writes the source and its forks
        assert (await session.put(f"{b}/v1/stream/{source}", headers=TEXT)).status == 201
        assert await _post(session, b, source, "s0\n") == 204
        forks = [stream_in(prefix, pair.owners[a], f"f{i}x") for i in range(8)]  # ids hash to A
        for fork in forks:
            headers = {**TEXT, "Stream-Forked-From": f"/v1/stream/{source}"}
            async with session.put(f"{b}/v1/stream/{fork}", headers=headers) as made:
                assert made.status == 201, await made.text()
            assert await _post(session, a, fork, f"{fork}\n") == 204, fork  # through A
        for fork in forks:
            assert await _read(session, b, fork) == f"s0\n{fork}\n"


async def test_a_fork_of_another_buckets_stream_is_written_by_its_sources_owner(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    """A fork across buckets lives in its source's partition, so in its source's slot: made
    and appended to through the other instance, both are routed to the source's owner, and
    either instance reads it."""
    prefix = f"xbroute{unique}."
    async with two_instances(kafka_bootstrap, prefix, tmp_path, total_s=60) as pair:
        session, a, b = pair.session, pair.a, pair.b
        source = stream_in(prefix, pair.owners[b], "src")  # in `_default`, written by B
        assert (await session.put(f"{b}/v1/stream/{source}", headers=TEXT)).status == 201
        assert await _post(session, b, source, "s0\n") == 204
        bucket = f"xf{unique}"
        assert (await session.put(f"{a}/{bucket}")).status == 201
        forked = {**TEXT, "Stream-Forked-From": f"/v1/stream/{source}"}
        async with session.put(f"{a}/{bucket}/fork", headers=forked) as made:
            assert made.status == 201, await made.text()
        async with session.post(f"{a}/{bucket}/fork", data="own\n", headers=TEXT) as posted:
            assert posted.status == 204, await posted.text()
        for base in (a, b):
            async with session.get(f"{base}/{bucket}/fork", params={"offset": "-1"}) as read:
                assert (read.status, await read.text()) == (200, "s0\nown\n")


@pytest.mark.timeout(300)
async def test_a_name_taken_through_one_owner_is_refused_by_the_other_at_once(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    """A plain stream is placed in its own id's slot, a fork in its source's: the owner that
    decides a creation must see a stream of that name another owner just made (409 for
    another configuration), not make a second one over it."""
    prefix = f"names{unique}."
    json_type = {"Content-Type": "application/json"}
    async with two_instances(kafka_bootstrap, prefix, tmp_path, total_s=60) as pair:
        session, a, b = pair.session, pair.a, pair.b
        source = stream_in(prefix, pair.owners[b], "src")  # its forks are decided by B
        assert (await session.put(f"{b}/v1/stream/{source}", headers=TEXT)).status == 201
        fork_of = {"Stream-Forked-From": f"/v1/stream/{source}"}
        for i in range(6):
            plain = stream_in(prefix, pair.owners[a], f"p{i}x")  # made by A, then forked at B
            assert (await session.put(f"{a}/v1/stream/{plain}", headers=json_type)).status == 201
            async with session.put(f"{b}/v1/stream/{plain}", headers=TEXT | fork_of) as r:
                assert r.status == 409, (plain, r.status, await r.text())
            fork = stream_in(prefix, pair.owners[a], f"f{i}y")  # a fork made by B, then at A
            async with session.put(f"{b}/v1/stream/{fork}", headers=TEXT | fork_of) as r:
                assert r.status == 201, await r.text()
            async with session.put(f"{a}/v1/stream/{fork}", headers=json_type) as r:
                assert r.status == 409, (fork, r.status, await r.text())


OWNERSHIP_CHANGES = ("assigned write slots", "revoked write slots", "lost write slots")


def _changes_ownership(log_line: str) -> bool:
    """A log line of a slot gained or lost (cooperative rebalances also log empty rounds)."""
    return any(change in log_line for change in OWNERSHIP_CHANGES) and "[]" not in log_line


@pytest.mark.timeout(300)
async def test_an_owner_killed_and_restarted_at_once_takes_its_slots_straight_back(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    prefix = f"static{unique}."
    # The dead incarnation's session outlasts the test: only static membership can hand
    # its slots back (a new dynamic member would wait for it and never become ready).
    env = cluster_env(kafka_bootstrap, prefix, tmp_path)
    env["DURABLE_KAFKA_OWNER_SESSION_TIMEOUT_MS"] = "300000"
    a_port, b_log = free_port(), tmp_path / "b.log"
    # A fresh connection per request: none kept alive to the killed process is reused.
    connector = aiohttp.TCPConnector(force_close=True)
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        with running_adapter(env, b_log, free_port()) as b:
            with running_adapter(env, tmp_path / "a.log", a_port) as a:
                before = await until_owned(session, {a: None, b: None})
                stream = stream_in(prefix, before[a], "s")
                assert (await session.put(f"{a}/v1/stream/{stream}", headers=TEXT)).status == 201
                b_seen = len(b_log.read_text())
                signal_adapter(a_port, signal.SIGKILL)
            with running_adapter(env, tmp_path / "a2.log", a_port) as a:  # /readyz said 200
                first = await _post(session, a, stream, "first\n")
                after = {a: await owned(session, a), b: await owned(session, b)}
                forwarded = await _post(session, b, stream, "second\n")
                body = await _read(session, a, stream)
                b_since_kill = b_log.read_text()[b_seen:]  # before A leaves, handing B its slots
    assert first == 204  # accepted at the first try, no 503 while ownership moves
    assert after == before  # the same slots, no other member's assignment changed
    assert not [line for line in b_since_kill.splitlines() if _changes_ownership(line)]
    assert forwarded == 204
    assert body == "first\nsecond\n"


@pytest.mark.timeout(300)
async def test_reads_through_another_instance_keep_a_sliding_ttl_alive_on_its_owner(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    """The owner decides expiry and a renewal by a read is written nowhere: reads the other
    instance serves are told to the owner, so a stream read only there outlives its TTL on
    the owner while it is read, and still expires once nobody reads it."""
    prefix = f"ttlreads{unique}."
    async with two_instances(kafka_bootstrap, prefix, tmp_path, total_s=60) as pair:
        session, a, b = pair.session, pair.a, pair.b
        stream = stream_in(prefix, pair.owners[a], "ttl")  # A owns it and decides its expiry
        url_a, url_b = f"{a}/v1/stream/{stream}", f"{b}/v1/stream/{stream}"
        async with session.put(url_a, headers=TEXT | {"Stream-TTL": "2"}) as made:
            assert made.status == 201, await made.text()
        assert await _post(session, a, stream, "x\n") == 204
        for _ in range(100):  # until B has followed the creation
            async with session.get(url_b, params={"offset": "-1"}) as seen:
                if seen.status == 200 and await seen.text() == "x\n":
                    break
            await asyncio.sleep(0.1)
        for _ in range(12):  # 6 s, three TTLs: read only through B
            assert await _read(session, b, stream) == "x\n"
            await asyncio.sleep(0.5)
        async with session.head(url_a) as head:  # HEAD is no access: A's own verdict
            assert head.status == 200
        await asyncio.sleep(3.0)  # nobody reads: it runs out on the owner as before
        async with session.head(url_a) as head:
            assert head.status == 404


@pytest.mark.timeout(180)
async def test_a_creation_answered_through_another_instance_is_located_where_the_client_asked(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    prefix = f"loc{unique}."
    async with two_instances(kafka_bootstrap, prefix, tmp_path) as pair:
        session, a, b = pair.session, pair.a, pair.b
        stream = stream_in(prefix, pair.owners[b], "loc")
        async with session.put(f"{a}/v1/stream/{stream}", headers=TEXT) as reply:
            assert reply.status == 201, await reply.text()
            assert reply.headers["Location"] == f"{a}/v1/stream/{stream}"
        slots = SlotMap(prefix, SLOTS)
        bucket = next(
            f"loc{i}" for i in range(1000) if slots.of_bucket(f"loc{i}") in pair.owners[b]
        )
        async with session.put(f"{a}/{bucket}") as reply:
            assert reply.status == 201, await reply.text()
            assert reply.headers["Location"] == f"{a}/{bucket}"
