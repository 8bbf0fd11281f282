"""`serve --workers 2`: one port, two owners of the write slots, a dead worker restarted."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from devstack.process import free_port
from tests.adapter_process import adapter_pid, running_adapter, worker_pids, worker_urls
from tests.cluster import SLOTS, TEXT, cluster_env, owned, slot_of

pytestmark = [pytest.mark.integration]

STREAMS = [f"w{i}" for i in range(24)]
APPENDS = 3  # per stream, per round


def _fresh() -> aiohttp.ClientSession:
    """A client that opens a connection per request: the kernel spreads them over the workers."""
    connector = aiohttp.TCPConnector(force_close=True)
    return aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=30))


async def _until_every_slot_owned(base: str, timeout_s: float = 90) -> set[frozenset[int]]:
    """Ask /readyz on fresh connections until the workers that answered are all ready, know
    every slot's owner (no write answered 503) and own every slot between them; return each
    one's slots."""
    seen: dict[frozenset[int], bool] = {}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    async with _fresh() as session:
        while loop.time() < deadline:
            try:
                async with session.get(f"{base}/readyz") as reply:
                    ownership = (await reply.json())["checks"]["ownership"]
                    settled = ownership.get("unroutable_slots") == []
                    seen[frozenset(ownership.get("owned_slots", ()))] = (
                        reply.status == 200 and settled
                    )
            except aiohttp.ClientError:
                pass  # a worker being killed or restarted
            ready = {slots for slots, ok in seen.items() if ok and slots}
            if len(ready) >= 2 and set().union(*ready) == set(range(SLOTS)):
                if sum(len(slots) for slots in ready) == SLOTS:  # no stale, overlapping view
                    return ready
                seen.clear()
            await asyncio.sleep(0.05)
    raise AssertionError(f"the workers never shared every slot: {seen}")


async def _append_round(base: str, round_: int) -> None:
    async with _fresh() as session:
        for stream in STREAMS:
            for i in range(APPENDS):
                url = f"{base}/v1/stream/{stream}"
                async with session.post(url, data=f"{round_}:{i}\n", headers=TEXT) as reply:
                    assert reply.status in (200, 204), (stream, reply.status, await reply.text())


async def _create(base: str) -> None:
    async with _fresh() as session:
        for stream in STREAMS:
            async with session.put(f"{base}/v1/stream/{stream}", headers=TEXT) as reply:
                assert reply.status == 201, (stream, await reply.text())


async def _missing_content_type_is_400(base: str) -> None:
    """Forwarded or not, an append without Content-Type is judged as sent (a forward once
    added aiohttp's application/octet-stream, so the owner answered 409)."""
    async with _fresh() as session:
        for stream in STREAMS:
            url, bare = f"{base}/v1/stream/{stream}", ("Content-Type",)
            async with session.post(url, data=b"x", skip_auto_headers=bare) as reply:
                assert reply.status == 400, (stream, reply.status, await reply.text())


async def _reads_its_own_writes(base: str) -> None:
    """Each request on a new connection (so on either worker): a stream just created, then
    appended to, is read back at once, whichever worker owns it."""
    async with _fresh() as session:
        for i in range(len(STREAMS)):
            url = f"{base}/v1/stream/ryw{i}"
            async with session.put(url, headers=TEXT) as reply:
                assert reply.status == 201, await reply.text()
            async with session.head(url) as reply:
                assert reply.status == 200, (url, reply.status)
            async with session.post(url, data=b"mine\n", headers=TEXT) as reply:
                assert reply.status in (200, 204), await reply.text()
            async with session.get(url, params={"offset": "-1"}) as reply:
                assert (reply.status, await reply.text()) == (200, "mine\n"), url


async def _bodies(base: str) -> dict[str, list[str]]:
    async with _fresh() as session:
        found = {}
        for stream in STREAMS:
            url = f"{base}/v1/stream/{stream}"
            async with session.get(url, params={"offset": "-1"}) as reply:
                assert reply.status == 200, await reply.text()
                found[stream] = (await reply.text()).splitlines()
        return found


async def _until_restarted(port: int, killed: int, timeout_s: float = 30) -> set[int]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while loop.time() < deadline:
        pids = worker_pids(port)
        if len(pids) == 2 and killed not in pids:
            return pids
        await asyncio.sleep(0.1)
    raise AssertionError(f"worker {killed} was not replaced: {worker_pids(port)}")


async def _ready(session: aiohttp.ClientSession, url: str) -> bool:
    try:
        async with session.get(f"{url}/readyz") as reply:
            return reply.status == 200
    except aiohttp.ClientError:
        return False


async def _only_ready_workers_take_connections(base: str, urls: list[str]) -> None:
    """Until every worker says ready on its own URL, `/readyz` on the shared port (new
    connections) answers 200: a restarted worker shares the port only once ready."""
    statuses: set[int] = set()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    async with _fresh() as session:
        while loop.time() < deadline:
            for _ in range(10):
                with contextlib.suppress(aiohttp.ClientError):
                    async with session.get(f"{base}/readyz") as reply:
                        statuses.add(reply.status)
            if all([await _ready(session, url) for url in urls]):
                assert statuses == {200}, statuses
                return
            await asyncio.sleep(0.05)
    raise AssertionError("the restarted worker never became ready")


@pytest.mark.timeout(300)
async def test_two_workers_share_the_port_and_a_killed_one_is_restarted(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    env = cluster_env(kafka_bootstrap, f"wk{unique}.", tmp_path)
    port = free_port()
    with running_adapter(env, tmp_path / "workers.log", port, workers=2) as base:
        workers = worker_pids(port)
        assert len(workers) == 2
        await _until_every_slot_owned(base)
        await _create(base)  # through either worker: about half are forwarded to the other
        await _append_round(base, 0)
        await _missing_content_type_is_400(base)
        await _reads_its_own_writes(base)
        victim = min(workers)
        os.kill(victim, signal.SIGKILL)
        assert len(await _until_restarted(port, victim)) == 2
        await _only_ready_workers_take_connections(base, _worker_urls(tmp_path / "workers.log"))
        await _until_every_slot_owned(base)
        await _append_round(base, 1)
    # A fresh single process reads it all back from Kafka (its hot cache is empty).
    with running_adapter(env, tmp_path / "reader.log", workers=1) as reader:
        bodies = await _bodies(reader)
    expected = [f"{r}:{i}" for r in range(2) for i in range(APPENDS)]
    assert bodies == dict.fromkeys(STREAMS, expected)
    log = (tmp_path / "workers.log").read_text()
    assert "worker 0 exited" in log or "worker 1 exited" in log


DRAIN_S = 30.0  # `drain_timeout_ms` of the clean stop below: a bound, not the stop's length


@pytest.mark.timeout(300)
async def test_a_clean_stop_under_appends_ends_well_within_its_drain_and_loses_nothing(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    """`serve --workers 2` stopped (SIGTERM to its parent) while appends go on through its
    port, some forwarded between the workers: it exits before `drain_timeout_ms` ends, since a
    drain ends once the requests in flight are answered and nothing waits on a worker that
    has already stopped, and a fresh instance reads back every append it acknowledged, once
    and in order."""
    env = cluster_env(kafka_bootstrap, f"ws{unique}.", tmp_path)
    env["DURABLE_KAFKA_DRAIN_TIMEOUT_MS"] = str(int(DRAIN_S * 1000))
    port = free_port()
    acked: dict[str, list[str]] = {stream: [] for stream in STREAMS}
    refused: set[str] = set()  # answered 503: must not have been written
    with running_adapter(env, tmp_path / "workers.log", port, workers=2) as base:
        await _until_every_slot_owned(base)
        await _create(base)
        done = asyncio.Event()
        appends = [
            asyncio.create_task(_append_until(base, s, acked[s], refused, done)) for s in STREAMS
        ]
        await asyncio.sleep(2.0)
        parent = adapter_pid(port)
        signalled = time.monotonic()
        os.kill(parent, signal.SIGTERM)
        while not _gone(parent):
            assert time.monotonic() - signalled < DRAIN_S + 30, "the instance did not stop"
            await asyncio.sleep(0.05)
        took = time.monotonic() - signalled
        done.set()
        await asyncio.gather(*appends)
    assert took < DRAIN_S, f"the stop took {took:.1f}s: a drain waited for its bound"
    assert sum(map(len, acked.values())) > 0, "no append was acknowledged before the stop"
    with running_adapter(env, tmp_path / "reader.log", workers=1) as reader:
        bodies = await _bodies(reader)
    for stream, written in acked.items():
        found = bodies[stream]
        assert len(found) == len(set(found)), (stream, found)  # none written twice
        assert [body for body in found if body in set(written)] == written, (stream, found)
        assert not refused & set(found), (stream, sorted(refused & set(found)))


HELD_AFTER_HAND_OVER_S = 5.0  # a worker's drain and close, with nothing in flight: well below


@pytest.mark.timeout(300)
async def test_a_connection_lingering_over_an_unread_body_does_not_hold_the_stop(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    """A request answered before its body was sent (here 413, from its declared length) leaves
    its connection lingering: aiohttp reads on, for up to 10 s, so that the client sees the
    answer. With such a connection on each worker, a stop (SIGTERM to the parent) has no
    request in flight to drain: every worker ends within seconds of the last hand-over, not
    when the linger runs out (a stopping worker was held so, its slots unserved meanwhile)."""
    env = cluster_env(kafka_bootstrap, f"wl{unique}.", tmp_path)
    env["DURABLE_KAFKA_DRAIN_TIMEOUT_MS"] = str(int(DRAIN_S * 1000))
    port, log = free_port(), tmp_path / "workers.log"
    with running_adapter(env, log, port, workers=2):
        lingering = [await _unfinished_body(url) for url in worker_urls(log)]
        parent = adapter_pid(port)
        os.kill(parent, signal.SIGTERM)
        signalled = time.monotonic()
        while not _gone(parent):
            assert time.monotonic() - signalled < DRAIN_S + 30, "the instance did not stop"
            await asyncio.sleep(0.05)
        for writer in lingering:
            writer.close()
    handed = _logged(log, r"slots handed over in ([\d.]+) s")
    stopped = _logged(log, r"stopped ([\d.]+) s after the signal")
    assert handed.keys() == stopped.keys() == {0, 1}, log.read_text()
    ended = _logged(log, r"(ended) a connection's linger")
    assert ended.keys() == {0, 1}, log.read_text()  # each worker's stop met its linger
    held = {w: float(stopped[w]) - float(handed[w]) for w in stopped}
    assert max(held.values()) < HELD_AFTER_HAND_OVER_S, (handed, stopped)


def _logged(log: Path, pattern: str) -> dict[int, str]:
    """Each worker's first group of `pattern` in its (JSON) log line matching it."""
    found: dict[int, str] = {}
    for line in log.read_text().splitlines():
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            matched = re.search(pattern, record["message"])
            if matched is not None and "worker" in record:
                found[int(record["worker"])] = matched[1]
    return found


async def _unfinished_body(url: str) -> asyncio.StreamWriter:
    """A connection to `url` whose append declared a body too large to take and sent only
    its start: answered 413 at once, it lingers over the rest."""
    host, _, port = url.removeprefix("http://").partition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = f"POST /v1/stream/lingering HTTP/1.1\r\nHost: {host}\r\nContent-Type: text/plain\r\n"
    writer.write(head.encode() + b"Content-Length: 1000000000000\r\n\r\nstart")
    status = await asyncio.wait_for(reader.readline(), 30)
    assert status.startswith(b"HTTP/1.1 413 "), status
    return writer


async def _append_until(
    base: str, stream: str, acked: list[str], refused: set[str], done: asyncio.Event
) -> None:
    """Append `stream`'s next body again and again, on fresh connections (spread over the
    workers), until `done`; note each one acknowledged, and each one answered 503 (nothing
    written). Any other failure (a connection cut) may or may not have been written."""
    count = 0
    async with _fresh() as session:
        while not done.is_set():
            body, count = f"{stream}.{count}", count + 1
            try:
                url = f"{base}/v1/stream/{stream}"
                async with session.post(url, data=f"{body}\n", headers=TEXT) as reply:
                    if reply.status in (200, 204):
                        acked.append(body)
                        continue
                    if reply.status == 503:
                        refused.add(body)
            except (aiohttp.ClientError, TimeoutError):  # cut, or held past the client's 30 s
                pass
            await asyncio.sleep(0.05)


def _pool(folder: Path, exit_status: int, linger_s: float = 0.0) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "tests.pool_process", str(folder), str(exit_status)]
    argv += [str(linger_s)]
    return subprocess.Popen(argv, cwd=Path(__file__).resolve().parents[2])


def _started(folder: Path, count: int, timeout_s: float = 20) -> dict[str, list[int]]:
    """Each worker index's pids so far, once `count` workers in all have started."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found: dict[str, list[int]] = {}
        for marker in sorted(folder.iterdir(), key=lambda p: p.stat().st_mtime_ns):
            index, _, pid = marker.name.partition(".")
            found.setdefault(index, []).append(int(pid))
        if sum(map(len, found.values())) >= count:
            return found
        time.sleep(0.05)
    raise AssertionError(f"fewer than {count} workers started: {list(folder.iterdir())}")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"


@pytest.mark.timeout(60)
def test_the_parent_restarts_a_killed_worker_and_stops_every_worker_on_sigterm(
    tmp_path: Path,
) -> None:
    with _pool(tmp_path, 0) as parent:
        first = _started(tmp_path, 2)
        os.kill(first["0"][0], signal.SIGKILL)
        again = _started(tmp_path, 3)
        assert len(again["0"]) == 2  # worker 0 again, in a new process
        assert again["1"] == first["1"]  # the other untouched
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(30) == 0
    assert all(_gone(pid) for pids in again.values() for pid in pids)


@pytest.mark.timeout(60)
def test_a_stopped_worker_s_own_port_refuses_while_its_sibling_still_drains(
    tmp_path: Path,
) -> None:
    """Once stopping, the parent restarts no worker, so it keeps none of their listeners open:
    a write forwarded to a worker that has stopped is refused at once (its forwarder answers
    503), not left in a backlog that nobody accepts from until the forwarder's own drain runs
    out (a whole deployment stopped at once waited so, 10 s)."""
    with _pool(tmp_path, 0, linger_s=20) as parent:
        first = _started(tmp_path, 2)
        port = int(next(tmp_path.glob(f"0.{first['0'][0]}")).read_text())
        parent.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        while not _gone(first["0"][0]):
            assert time.monotonic() < deadline, "worker 0 did not stop"
            time.sleep(0.05)
        assert parent.poll() is None, "the parent no longer waits for worker 1's drain"
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
        os.kill(first["1"][0], signal.SIGKILL)  # its drain is not what this test is about
        parent.wait(30)


@pytest.mark.timeout(60)
def test_a_worker_s_configuration_error_stops_the_instance_with_exit_2(tmp_path: Path) -> None:
    with _pool(tmp_path, 2) as parent:
        assert parent.wait(30) == 2


@pytest.mark.timeout(60)
def test_a_worker_dying_again_and_again_stops_the_instance_with_exit_1(tmp_path: Path) -> None:
    with _pool(tmp_path, 1) as parent:
        assert parent.wait(45) == 1
    restarts = _started(tmp_path, 2)
    assert max(map(len, restarts.values())) > 5  # it was restarted 5 times first


@pytest.mark.timeout(60)
def test_the_workers_end_when_the_parent_is_killed(tmp_path: Path) -> None:
    with _pool(tmp_path, 0) as parent:
        workers = _started(tmp_path, 2)
        parent.kill()
        parent.wait(10)
    deadline = time.monotonic() + 10
    while not all(_gone(pid) for pids in workers.values() for pid in pids):
        assert time.monotonic() < deadline, "a worker outlived its killed parent"
        time.sleep(0.05)


def _worker_urls(log: Path) -> list[str]:
    """Each worker's own URL (its advertised one, which serves as the shared port does)."""
    line = next(line for line in log.read_text().splitlines() if "workers: " in line)
    return re.findall(r"http://127\.0\.0\.1:\d+", line.partition("workers: ")[2])


async def _owner_and_other(base: str, log: Path, slot: int) -> tuple[str, str]:
    """The URL of the worker owning `slot`, and of the other one."""
    await _until_every_slot_owned(base)
    urls = _worker_urls(log)
    async with _fresh() as session:
        slots = {url: await owned(session, url) or set() for url in urls}
    owner = next(url for url in urls if slot in slots[url])
    return owner, next(url for url in urls if url != owner)


@pytest.mark.timeout(120)
async def test_a_fork_renewed_by_a_read_on_its_owner_lives_on_at_the_other_worker(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    """The conformance suite's `fork outlives its source via TTL renewal` with 2 workers: a
    read renews a sliding TTL where it is served; a HEAD on the sibling (not an access) must
    not find the fork expired on the strength of the sibling's older view."""
    prefix, log = f"wt{unique}.", tmp_path / "workers.log"
    env = cluster_env(kafka_bootstrap, prefix, tmp_path)
    ttl = {"Stream-TTL": "6"}
    with running_adapter(env, log, workers=2) as base:
        owner, other = await _owner_and_other(base, log, slot_of(prefix, "src"))
        async with _fresh() as session:
            async with session.put(f"{base}/v1/stream/src", headers=TEXT | ttl) as reply:
                assert reply.status == 201, await reply.text()
            created = time.monotonic()
            fork = {"Stream-Forked-From": "/v1/stream/src"}
            async with session.put(f"{base}/v1/stream/fork", headers=TEXT | ttl | fork) as reply:
                assert reply.status == 201, await reply.text()
            await asyncio.sleep(3)
            async with session.get(f"{owner}/v1/stream/fork", params={"offset": "-1"}) as reply:
                assert reply.status == 200, await reply.text()  # renews the fork's TTL
            renewed = time.monotonic()
            await asyncio.sleep(max(0.0, created + 6.3 - time.monotonic()))
            async with session.head(f"{other}/v1/stream/fork") as reply:
                status = reply.status
            if time.monotonic() - renewed >= 6:  # the renewed TTL itself ran out: cannot tell
                pytest.skip("the machine stalled for over 2.7 s between the read and the HEAD")
            assert status == 200, "the read's renewal did not reach the other worker"
            async with session.head(f"{other}/v1/stream/src") as reply:
                assert reply.status == 404  # idle since its creation: expired everywhere


@pytest.mark.timeout(240)
async def test_an_instance_killed_whole_and_restarted_at_once_takes_its_places_back(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    """kill -9 of the parent and every worker, restarted at once on the same port: its new
    workers (new ports of their own) take their former members' places in the owners' group
    instead of being refused as impostors until those sessions end (30 s here)."""
    env = cluster_env(kafka_bootstrap, f"wr{unique}.", tmp_path)
    env["DURABLE_KAFKA_OWNER_SESSION_TIMEOUT_MS"] = "30000"
    port = free_port()
    with running_adapter(env, tmp_path / "first.log", port, workers=2) as base:
        await _until_every_slot_owned(base)
        parent, workers = adapter_pid(port), worker_pids(port)
        os.kill(parent, signal.SIGSTOP)  # no restart, no SIGTERM to the workers meanwhile
        for pid in workers:
            os.kill(pid, signal.SIGKILL)
        os.kill(parent, signal.SIGKILL)
    with running_adapter(env, tmp_path / "second.log", port, workers=2) as base:
        await _until_every_slot_owned(base)
        async with _fresh() as session, session.put(f"{base}/v1/stream/after", headers=TEXT) as r:
            assert r.status == 201, await r.text()
    log = (tmp_path / "second.log").read_text()
    assert "is already a member" not in log
    assert "exited" not in log
