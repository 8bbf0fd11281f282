"""Several instances while one of them is paused or cannot be reached by its peers: the others
keep answering, and the sick one's slots move."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import aiohttp
import pytest

from devstack.process import free_port
from tests.adapter_process import running_adapter
from tests.cluster import (
    TEXT,
    cluster_env,
    past_moves,
    signal_adapter,
    stream_in,
    until_owned,
    until_read,
)
from tests.faults.relay import Relay

pytestmark = [pytest.mark.integration, pytest.mark.faults]

PAUSE_S = 30.0  # how long the paused owner stays stopped, at most
TO_PAUSED = 110  # appends forwarded to the paused owner's slot: more than one pool holds


async def _append(session: aiohttp.ClientSession, url: str, body: str) -> int:
    async with session.post(url, data=body, headers=TEXT) as reply:
        return reply.status


async def _read(session: aiohttp.ClientSession, url: str) -> str:
    async with session.get(url, params={"offset": "-1"}) as reply:
        return await reply.text() if reply.status == 200 else f"HTTP {reply.status}"


def _port(base: str) -> int:
    return int(base.rsplit(":", 1)[1])


@pytest.mark.timeout(240)
async def test_a_paused_owner_delays_no_other_owner_and_its_forwards_follow_its_slot(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    prefix = f"pause{unique}."
    env = cluster_env(kafka_bootstrap, prefix, tmp_path)
    # No pool limit in this client: its own requests to `c` must not queue behind each other.
    unlimited = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=unlimited, timeout=timeout) as session:
        with (
            running_adapter(env, tmp_path / "a.log", free_port()) as a,
            running_adapter(env, tmp_path / "b.log", free_port()) as b,
            running_adapter(env, tmp_path / "c.log", free_port()) as c,
        ):
            owners = await until_owned(session, {a: None, b: None, c: None})
            paused, healthy = stream_in(prefix, owners[a], "pa"), stream_in(prefix, owners[b], "hb")
            for stream in (paused, healthy):
                status, body = await past_moves(
                    session, "PUT", f"{c}/v1/stream/{stream}", headers=TEXT
                )
                assert status == 201, body
            signal_adapter(_port(a), signal.SIGSTOP)
            # Through `c`: many appends to the paused owner's slot, then a few to `b`'s.
            stuck = [
                asyncio.create_task(_append(session, f"{c}/v1/stream/{paused}", f"{i},"))
                for i in range(TO_PAUSED)
            ]
            await asyncio.sleep(0.5)  # they hold connections to the paused owner now
            to_healthy = [
                asyncio.create_task(_append(session, f"{c}/v1/stream/{healthy}", "h"))
                for _ in range(5)
            ]
            try:
                # Answered while `a` is still stopped: the paused owner delays nobody else.
                answered, _ = await asyncio.wait(to_healthy, timeout=PAUSE_S)
                # `a`'s slot moves once its session ends; the appends forwarded to it follow.
                moved, _ = await asyncio.wait(stuck, timeout=PAUSE_S)
            finally:
                signal_adapter(_port(a), signal.SIGCONT)
                for task in (*stuck, *to_healthy):
                    task.cancel()
            assert [t.result() for t in to_healthy if t in answered] == [204] * 5
            assert [t.result() for t in stuck if t in moved] == [204] * TO_PAUSED
            written = await _read(session, f"{c}/v1/stream/{paused}")
            assert sorted(written.split(",")[:-1], key=int) == [str(i) for i in range(TO_PAUSED)]


@pytest.mark.timeout(240)
async def test_an_owner_its_peers_cannot_reach_refuses_nothing_written_and_loses_its_slots(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    prefix = f"unreach{unique}."
    env = cluster_env(kafka_bootstrap, prefix, tmp_path)
    b_port = free_port()
    relay = Relay(b_port)  # `b` advertises the relay's address
    await relay.open()
    behind = env | {"DURABLE_KAFKA_ADVERTISE_URL": relay.url}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
        with (
            running_adapter(env, tmp_path / "a.log", free_port()) as a,
            running_adapter(behind, tmp_path / "b.log", b_port) as b,
        ):
            owners = await until_owned(session, {a: None, b: None})
            stream = stream_in(prefix, owners[b], "u")
            status, body = await past_moves(session, "PUT", f"{a}/v1/stream/{stream}", headers=TEXT)
            assert status == 201, body
            await relay.close()  # from now on nobody listens where `b` says it does
            url = f"{a}/v1/stream/{stream}"
            # Through `a`, forwarded to an address nobody listens on: refused as not written,
            # well within the client's patience (before `b` has left its slots).
            quick = aiohttp.ClientTimeout(total=10)
            async with session.post(url, data="lost", headers=TEXT, timeout=quick) as reply:
                assert reply.status == 503, await reply.text()
                assert reply.headers["Retry-After"] == "1"
                assert (await reply.json())["error"]["code"] == "unavailable"
            assert await _read(session, url) == ""
            # `b` cannot be reached, so its slots move to `a` and writes go through.
            status, body = await past_moves(
                session, "POST", url, within_s=60, data="kept", headers=TEXT
            )
            assert status == 204, body
            assert await until_read(lambda: _read(session, url), "kept") == "kept"

            async def seen() -> tuple[list[int], bool]:
                """What `b` says of itself: its slots (a peer may have removed it from the
                owners' group first) and whether its advertised URL answers (3 checks, 1 s
                apart, say it does not)."""
                async with session.get(f"{b}/readyz") as reply:
                    ownership = (await reply.json())["checks"]["ownership"]
                return list(ownership["owned_slots"]), bool(ownership["advertised_reachable"])

            gone: tuple[list[int], bool] = ([], False)
            assert await until_read(seen, gone, timeout_s=30) == gone


PER_ADDRESS = 4  # max_connections_per_address
CLIENTS = 4  # client addresses, each under the limit
BURST = 3  # appends in flight from each client address


async def _burst(session: aiohttp.ClientSession, url: str, n: int) -> list[int]:
    return list(await asyncio.gather(*(_append(session, url, ".") for _ in range(n))))


@pytest.mark.timeout(180)
async def test_a_peers_connections_do_not_count_against_the_per_address_limit(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    prefix = f"peerkey{unique}."
    key = tmp_path / "peer.key"
    key.write_text("a shared key of the deployment's instances\n")
    env = cluster_env(kafka_bootstrap, prefix, tmp_path) | {
        "DURABLE_KAFKA_MAX_CONNECTIONS_PER_ADDRESS": str(PER_ADDRESS),
        "DURABLE_KAFKA_PEER_KEY_FILE": str(key),
    }
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        with (
            running_adapter(env, tmp_path / "a.log", free_port()) as a,
            running_adapter(env, tmp_path / "b.log", free_port()) as b,
        ):
            owners = await until_owned(session, {a: None, b: None})
            stream = stream_in(prefix, owners[b], "k")
            status, body = await past_moves(session, "PUT", f"{b}/v1/stream/{stream}", headers=TEXT)
            assert status == 201, body
            # Clients on addresses of their own, each under the limit, writing through `a`: `a`
            # forwards them all to `b` from one address, over the limit if it counted.
            clients = [
                aiohttp.ClientSession(
                    connector=aiohttp.TCPConnector(limit=BURST, local_addr=(f"127.0.0.{i}", 0)),
                    timeout=aiohttp.ClientTimeout(total=60),
                )
                for i in range(2, 2 + CLIENTS)
            ]
            try:
                statuses: list[int] = []
                for _ in range(5):
                    bursts = [_burst(c, f"{a}/v1/stream/{stream}", BURST) for c in clients]
                    statuses += [s for burst in await asyncio.gather(*bursts) for s in burst]
            finally:
                for client in clients:
                    await client.close()
            assert statuses == [204] * (5 * CLIENTS * BURST)
            written = await _read(session, f"{b}/v1/stream/{stream}")
            assert written == "." * (5 * CLIENTS * BURST)
