"""Auth across two instances: a forwarded write carries its token to the owner, which checks
it again; a refused write is refused where it enters, never forwarded. And no token, sent
either way, ever reaches the log."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from devstack.process import free_port
from tests.adapter_process import running_adapter
from tests.cluster import TEXT, cluster_env, stream_in, until_owned
from tests.tokens import token_file

pytestmark = [pytest.mark.integration, pytest.mark.faults]

WRITER = "writer-secret-token-0123456789-planted"
READER = "reader-secret-token-0123456789-planted"


@pytest.mark.timeout(180)
async def test_forwarded_writes_are_authorized_by_the_owner_too(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    prefix = f"authfw{unique}."
    tokens = token_file(
        tmp_path / "tokens.toml",
        {"writer": (WRITER, ["admin:*", "append:*", "read:*"]), "reader": (READER, ["read:*"])},
    )
    env = cluster_env(kafka_bootstrap, prefix, tmp_path) | {
        "DURABLE_KAFKA_AUTH_MODE": "static",
        "DURABLE_KAFKA_AUTH_TOKEN_FILE": str(tokens),
        "DURABLE_KAFKA_AUTH_QUERY_TOKEN": "true",
        "DURABLE_KAFKA_LOG_LEVEL": "debug",
    }
    writer = {"Authorization": f"Bearer {WRITER}"}
    reader = {"Authorization": f"Bearer {READER}"}
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        with (
            running_adapter(env, logs[0], free_port()) as a,
            running_adapter(env, logs[1], free_port()) as b,
        ):
            owners = await until_owned(session, {a: None, b: None})
            url = f"{b}/v1/stream/{stream_in(prefix, owners[a], 'auth')}"  # b forwards to a
            async with session.put(url, headers=writer | TEXT) as reply:
                assert reply.status == 201, await reply.text()
            async with session.post(url, headers=writer | TEXT, data=b"ok") as reply:
                assert reply.status == 204
            async with session.post(url, headers=reader | TEXT, data=b"no") as reply:
                assert reply.status == 403
            async with session.post(url, headers=TEXT, data=b"no") as reply:
                assert reply.status == 401
            async with session.post(f"{url}?access_token={WRITER}", headers=TEXT, data=b"+"):
                pass
            async with session.get(f"{url}?offset=-1", headers=reader) as reply:
                assert await reply.read() == b"ok+"
            # A bad token, and a request that fails below the routes, with tokens in them.
            async with session.get(f"{url}?offset=-1&access_token={READER}x") as reply:
                assert reply.status == 401
            async with session.get(f"{b}/nope/%ff?access_token={READER}", headers=writer):
                pass
    for log in logs:
        text = log.read_text()
        assert WRITER not in text
        assert READER not in text
