"""A resumed zombie catches up with what the new owner of its slots did while it was stopped.

Instance A owns some write slots and is stopped (SIGSTOP) past its session; instance B takes
them over and creates a stream, deletes one and starts a producer on a third, all in A's old
slots. When A resumes, its catalog must hold what the log says (the meta follower applies
every record not written by A itself), so that when it owns the slots again it neither
re-creates a stream over acknowledged data, nor resurrects a deleted one, nor takes a
producer's retry for new data. A third instance replaying the log from scratch must agree.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import aiohttp
import pytest

from devstack.process import free_port
from tests.adapter_process import running_adapter
from tests.cluster import TEXT, cluster_env, signal_adapter, stream_in, until_owned

pytestmark = [pytest.mark.integration, pytest.mark.faults]

PRODUCER = {"Producer-Id": "p", "Producer-Epoch": "0", "Producer-Seq": "0"}


async def _status(session: aiohttp.ClientSession, method: str, url: str, **kw: object) -> int:
    async with session.request(method, url, **kw) as reply:  # type: ignore[arg-type]
        return reply.status


async def _body(session: aiohttp.ClientSession, url: str) -> bytes:
    async with session.get(url, params={"offset": "-1"}) as reply:
        assert reply.status == 200, await reply.text()
        return await reply.read()


async def _answer(session: aiohttp.ClientSession, url: str) -> tuple[int, bytes]:
    """A read from the start, whatever its status (the follower may not have caught up yet)."""
    async with session.get(url, params={"offset": "-1"}) as reply:
        return reply.status, await reply.read()


async def _facts(session: aiohttp.ClientSession, base: str, ids: dict[str, str]) -> object:
    """What an instance's catalog says about the three streams."""
    v1 = f"{base}/v1/stream"
    return (
        await _status(session, "HEAD", f"{v1}/{ids['created']}"),
        await _status(session, "HEAD", f"{v1}/{ids['deleted']}"),
        await _answer(session, f"{v1}/{ids['created']}"),
        await _answer(session, f"{v1}/{ids['produced']}"),
    )


@pytest.mark.timeout(240)
async def test_a_resumed_zombie_applies_the_new_owners_changes(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    prefix = f"zombie{unique}."
    env = cluster_env(kafka_bootstrap, prefix, tmp_path)
    a_port = free_port()
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        with running_adapter(env, tmp_path / "a.log", a_port) as a:
            with running_adapter(env, tmp_path / "b.log", free_port()) as b:
                owners = await until_owned(session, {a: None, b: None})
                ids = {
                    k: stream_in(prefix, owners[a], k) for k in ("created", "deleted", "produced")
                }
                v1 = "/v1/stream"
                for key in ("deleted", "produced"):
                    assert await _status(session, "PUT", f"{a}{v1}/{ids[key]}", headers=TEXT) == 201
                assert (
                    await _status(
                        session, "POST", f"{a}{v1}/{ids['deleted']}", data=b"old", headers=TEXT
                    )
                    == 204
                )

                signal_adapter(a_port, signal.SIGSTOP)
                try:
                    await until_owned(session, {b: 8})  # A's session expired: B owns all
                    url = f"{b}{v1}/{ids['created']}"
                    assert await _status(session, "PUT", url, headers=TEXT) == 201
                    assert (
                        await _status(session, "POST", url, data=b"acknowledged", headers=TEXT)
                        == 204
                    )
                    assert await _status(session, "DELETE", f"{b}{v1}/{ids['deleted']}") == 204
                    produced = f"{b}{v1}/{ids['produced']}"
                    headers = TEXT | PRODUCER
                    assert (
                        await _status(session, "POST", produced, data=b"p0", headers=headers) == 200
                    )
                finally:
                    signal_adapter(a_port, signal.SIGCONT)
                expected = (200, 404, (200, b"acknowledged"), (200, b"p0"))
                for _ in range(100):  # A's follower catches up with B's records
                    if await _facts(session, a, ids) == expected:
                        break
                    await asyncio.sleep(0.1)
                assert await _facts(session, a, ids) == expected
            # B is gone: A owns every slot again and decides with what it learned.
            await until_owned(session, {a: 8})
            created = f"{a}{v1}/{ids['created']}"
            assert await _status(session, "PUT", created, headers=TEXT) == 200  # exists
            produced = f"{a}{v1}/{ids['produced']}"
            retry = TEXT | PRODUCER
            assert await _status(session, "POST", produced, data=b"p0", headers=retry) == 204
            deleted = f"{a}{v1}/{ids['deleted']}"
            assert await _status(session, "POST", deleted, data=b"x", headers=TEXT) == 404
            assert await _status(session, "PUT", deleted, headers=TEXT) == 201
            assert await _body(session, deleted) == b""  # a new stream, not the old one
            with running_adapter(env, tmp_path / "c.log", free_port()) as c:
                await until_owned(session, {a: None, c: None})
                assert await _facts(session, c, ids) == await _facts(session, a, ids)
                assert await _body(session, f"{c}{v1}/{ids['deleted']}") == b""
