"""Sliding TTLs with auth on: a read served by an instance (or worker) that does not own the
stream is told to its owner with the reader's own credential, sent in the URL or in a header,
so the stream lives while it is read; a telling the owner refuses is logged."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest

from devstack.process import free_port
from tests.adapter_process import running_adapter, worker_urls
from tests.cluster import TEXT, cluster_env, slot_of, stream_in, until_owned, until_read
from tests.tokens import token_file

pytestmark = [pytest.mark.integration]

WRITER = "renewal-writer-token-0123456789"
READER = "renewal-reader-token-0123456789"
STRANGER = "renewal-stranger-token-0123456789"  # known to the reading instance only
TTL_S = 3
READS = 16  # every half second: over two TTLs and a half
ENTRIES = {"writer": (WRITER, ["admin:*", "append:*", "read:*"]), "reader": (READER, ["read:*"])}


def _auth_env(tokens: Path) -> dict[str, str]:
    return {
        "DURABLE_KAFKA_AUTH_MODE": "static",
        "DURABLE_KAFKA_AUTH_TOKEN_FILE": str(tokens),
        "DURABLE_KAFKA_AUTH_QUERY_TOKEN": "true",
    }


async def _made(session: aiohttp.ClientSession, url: str) -> None:
    """A text stream with a sliding TTL holding `x`, made through its owner."""
    writer = {"Authorization": f"Bearer {WRITER}"}
    async with session.put(url, headers=writer | TEXT | {"Stream-TTL": str(TTL_S)}) as made:
        assert made.status == 201, await made.text()
    async with session.post(url, headers=writer | TEXT, data=b"x") as appended:
        assert appended.status == 204, await appended.text()


async def _read_by_query(session: aiohttp.ClientSession, url: str, token: str) -> list[int]:
    """Until the reading side shows the stream with its append (its follower may apply the
    create before the append), then READS reads with `?access_token=`: the status of each,
    and its body when 200."""
    params = {"offset": "-1", "access_token": token}

    async def seen() -> tuple[int, bytes]:
        async with session.get(url, params=params) as reply:
            return reply.status, await reply.read()

    await until_read(seen, (200, b"x"))
    statuses = []
    for _ in range(READS):
        async with session.get(url, params=params) as reply:
            statuses.append(reply.status)
            assert reply.status != 200 or await reply.read() == b"x"
        await asyncio.sleep(0.5)
    return statuses


async def _status_at(session: aiohttp.ClientSession, url: str) -> int:
    async with session.head(url, headers={"Authorization": f"Bearer {WRITER}"}) as head:
        return head.status  # HEAD is no access: the owner's own verdict


@pytest.mark.timeout(240)
async def test_reads_with_a_query_token_through_another_instance_renew_on_the_owner(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    prefix = f"authttl{unique}."
    env = cluster_env(kafka_bootstrap, prefix, tmp_path)
    known_to_a = token_file(tmp_path / "a.toml", ENTRIES)
    known_to_b = token_file(tmp_path / "b.toml", ENTRIES | {"stranger": (STRANGER, ["read:*"])})
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        with (
            running_adapter(env | _auth_env(known_to_a), tmp_path / "a.log", free_port()) as a,
            running_adapter(env | _auth_env(known_to_b), tmp_path / "b.log", free_port()) as b,
        ):
            owners = await until_owned(session, {a: None, b: None})
            kept, lost = stream_in(prefix, owners[a], "kept"), stream_in(prefix, owners[a], "lost")
            for stream in (kept, lost):  # A owns both and decides their expiry
                await _made(session, f"{a}/v1/stream/{stream}")
            read, _ = await asyncio.gather(
                _read_by_query(session, f"{b}/v1/stream/{kept}", READER),
                _read_by_query(session, f"{b}/v1/stream/{lost}", STRANGER),
            )
            kept_status = await _status_at(session, f"{a}/v1/stream/{kept}")
            lost_status = await _status_at(session, f"{a}/v1/stream/{lost}")
    assert read == [200] * READS
    assert kept_status == 200, "reads through B with ?access_token= did not renew it on A"
    assert lost_status == 404  # A refused B's tellings: read by a token A does not know
    logged = (tmp_path / "b.log").read_text()
    assert f"renewing /v1/stream/{lost} at {a}: 401" in logged
    for log in ("a.log", "b.log"):
        text = (tmp_path / log).read_text()
        assert READER not in text
        assert STRANGER not in text


@pytest.mark.timeout(240)
async def test_reads_with_a_query_token_through_a_sibling_worker_renew_on_its_owner(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    prefix, log = f"authttlw{unique}.", tmp_path / "workers.log"
    env = cluster_env(kafka_bootstrap, prefix, tmp_path)
    env |= _auth_env(token_file(tmp_path / "tokens.toml", ENTRIES))
    with running_adapter(env, log, workers=2):
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
            urls = worker_urls(log)
            slots = await until_owned(session, dict.fromkeys(urls))  # none moving
            stream = "sibling"
            owner = next(url for url in urls if slot_of(prefix, stream) in slots[url])
            other = next(url for url in urls if url != owner)
            await _made(session, f"{owner}/v1/stream/{stream}")
            read = await _read_by_query(session, f"{other}/v1/stream/{stream}", READER)
            status = await _status_at(session, f"{owner}/v1/stream/{stream}")
    assert read == [200] * READS
    assert status == 200, "reads through the sibling with ?access_token= did not renew it"
