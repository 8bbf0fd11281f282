"""Forks of another bucket's stream on a real broker: the scopes their creation needs, reads
across the fork point, the source deleted while the fork lives, and the source's bucket kept
while it holds the fork's records."""

from __future__ import annotations

from pathlib import Path

import pytest
from aiohttp import ClientResponse

from adapter.app import create_app
from adapter.http.keys import BUCKETS, STREAMS
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready
from tests.tokens import token_file

pytestmark = pytest.mark.integration

TEXT = {"Content-Type": "text/plain"}


async def _code(response: ClientResponse) -> str:
    body = await response.json()
    code = body["error"]["code"]
    assert isinstance(code, str)
    return code


async def _read(client: Client, path: str, offset: str = "-1") -> bytes:
    response = await client.get(path, params={"offset": offset})
    assert response.status == 200
    return await response.read()


async def _buckets(client: Client, unique: str, **auth: str) -> tuple[str, str, list[str]]:
    """A source bucket with a text stream `src` of three messages, an empty second bucket,
    and the source's tail after each message."""
    source_bucket, fork_bucket = f"/xs-{unique}", f"/xf-{unique}"
    for bucket in (source_bucket, fork_bucket):
        assert (await client.put(bucket, headers=auth)).status == 201
    source = f"{source_bucket}/src"
    assert (await client.put(source, headers=TEXT | auth)).status == 201
    tails = []
    for body in (b"a", b"b", b"c"):
        response = await client.post(source, data=body, headers=TEXT | auth)
        assert response.status == 204
        tails.append(response.headers["Stream-Next-Offset"])
    return source, fork_bucket, tails


async def test_a_fork_of_another_buckets_stream_reads_across_the_fork_point(
    client: Client, unique: str
) -> None:
    source, fork_bucket, tails = await _buckets(client, unique)
    fork = f"{fork_bucket}/fork"
    headers = {"Stream-Forked-From": source, "Stream-Fork-Offset": tails[1]}
    created = await client.put(fork, headers=headers, skip_auto_headers=("Content-Type",))
    assert created.status == 201
    assert created.headers["Content-Type"] == "text/plain"  # inherited across buckets too
    assert (await client.post(fork, data=b"X", headers=TEXT)).status == 204
    assert (await client.post(source, data=b"d", headers=TEXT)).status == 204
    assert await _read(client, fork) == b"abX"
    assert await _read(client, fork, tails[0]) == b"bX"  # the source's tokens below the cut
    assert await _read(client, source) == b"abcd"  # the fork's append is not the source's
    # The flat surface names the same source; a fork of it reads the same.
    flat = {"Stream-Forked-From": f"/v1/stream{source}", "Stream-Fork-Offset": tails[0]}
    assert (await client.put(f"{fork_bucket}/flat", headers=TEXT | flat)).status == 201
    assert await _read(client, f"{fork_bucket}/flat") == b"a"
    catalog = client.app[STREAMS].catalog
    src_meta = catalog.stream(f"xs-{unique}", "src")
    fork_meta = catalog.stream(f"xf-{unique}", "fork")
    assert src_meta is not None
    assert fork_meta is not None
    assert (fork_meta.home, fork_meta.partition) == (f"xs-{unique}", src_meta.partition)
    listed = await (await client.get(f"{fork_bucket}/streams")).json()
    assert sorted(s["stream_id"] for s in listed["streams"]) == ["flat", "fork"]


async def test_a_long_poll_on_a_fork_of_another_bucket_wakes_on_its_own_append(
    client: Client, unique: str
) -> None:
    source, fork_bucket, _ = await _buckets(client, unique)
    fork = f"{fork_bucket}/fork"
    created = await client.put(fork, headers=TEXT | {"Stream-Forked-From": source})
    tail = created.headers["Stream-Next-Offset"]
    waiting = client.get(fork, params={"offset": tail, "live": "long-poll"})
    assert (await client.post(fork, data=b"own", headers=TEXT)).status == 204
    response = await waiting
    assert (response.status, await response.read()) == (200, b"own")


async def test_deleting_the_source_while_a_fork_of_another_bucket_lives(
    client: Client, unique: str
) -> None:
    source, fork_bucket, _ = await _buckets(client, unique)
    source_bucket = source.removesuffix("/src")
    fork = f"{fork_bucket}/fork"
    assert (await client.put(fork, headers=TEXT | {"Stream-Forked-From": source})).status == 201
    assert (await client.post(fork, data=b"X", headers=TEXT)).status == 204
    assert (await client.delete(source)).status == 204
    gone = await client.get(source, params={"offset": "-1"})
    assert (gone.status, await _code(gone)) == (410, "gone")
    assert (await client.put(source, headers=TEXT)).status == 409  # blocked while kept
    assert await _read(client, fork) == b"abcX"  # the fork still reads the source's records
    # The source's bucket holds the fork's records: it cannot go while the fork is there.
    kept = await client.delete(source_bucket)
    assert (kept.status, await _code(kept)) == (409, "bucket_not_empty")
    assert f"xf-{unique}/fork" in (await kept.json())["error"]["message"]
    assert (await client.delete(fork)).status == 204  # the last fork: the source goes too
    assert client.app[STREAMS].catalog.stream(f"xs-{unique}", "src") is None
    assert (await client.head(source)).status == 404
    assert (await client.delete(source_bucket)).status == 204
    assert (await client.delete(fork_bucket)).status == 204


async def test_the_fork_bucket_goes_first_and_the_source_bucket_then(
    client: Client, unique: str
) -> None:
    """Deleting the fork's own bucket (once empty) is as for any bucket; the source's bucket
    no longer holds anyone's records after that."""
    source, fork_bucket, _ = await _buckets(client, unique)
    fork = f"{fork_bucket}/fork"
    assert (await client.put(fork, headers=TEXT | {"Stream-Forked-From": source})).status == 201
    full = await client.delete(fork_bucket)
    assert (full.status, await _code(full)) == (409, "bucket_not_empty")
    assert (await client.delete(fork)).status == 204
    assert (await client.delete(fork_bucket)).status == 204
    assert client.app[BUCKETS].catalog.housed_in(f"xs-{unique}") == []
    assert (await client.delete(source)).status == 204
    assert (await client.delete(source.removesuffix("/src"))).status == 204


SEEDER = "seeder-secret-token-0123456789"


async def test_creating_a_fork_across_buckets_needs_read_on_the_source_and_admin_on_its_own(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, tmp_path: Path, unique: str
) -> None:
    src, dst = f"xs-{unique}", f"xf-{unique}"
    tokens = {
        "both": ("both-secret-token-0123456789", [f"read:{src}", f"admin:{dst}"]),
        "no-read": ("no-read-secret-token-0123456789", [f"append:{src}", f"admin:{dst}"]),
        "no-admin": ("no-admin-secret-token-0123456789", [f"read:{src}", f"append:{dst}"]),
        "seeder": (SEEDER, ["admin:*", "append:*", "read:*"]),
    }
    path = token_file(tmp_path / "tokens.toml", tokens)
    settings = make_settings(auth_mode="static", auth_token_file=str(path))
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    source, fork_bucket, _ = await _buckets(client, unique, Authorization=f"Bearer {SEEDER}")
    forking = TEXT | {"Stream-Forked-From": source}

    async def fork_as(name: str, stream: str) -> ClientResponse:
        auth = {"Authorization": f"Bearer {tokens[name][0]}"}
        return await client.put(f"{fork_bucket}/{stream}", headers=forking | auth)

    no_read = await fork_as("no-read", "f1")
    assert (no_read.status, await _code(no_read)) == (403, "insufficient_scope")
    assert f'scope="read:{src}"' in no_read.headers["WWW-Authenticate"]
    no_admin = await fork_as("no-admin", "f2")
    assert (no_admin.status, await _code(no_admin)) == (403, "insufficient_scope")
    assert f'scope="admin:{dst}"' in no_admin.headers["WWW-Authenticate"]
    seeder = {"Authorization": f"Bearer {SEEDER}"}
    for refused in ("f1", "f2"):
        assert (await client.head(f"{fork_bucket}/{refused}", headers=seeder)).status == 404
    assert (await fork_as("both", "f3")).status == 201
    assert await _read_as(client, f"{fork_bucket}/f3", seeder) == b"abc"


async def _read_as(client: Client, path: str, auth: dict[str, str]) -> bytes:
    response = await client.get(path, params={"offset": "-1"}, headers=auth)
    assert response.status == 200
    return await response.read()


async def test_a_fork_across_buckets_is_the_same_after_a_restart(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str
) -> None:
    """Its lineage (source bucket, home) comes back from the meta topic: the new instance
    reads it the same, appends go beside its source's records, and the source's bucket is
    still kept."""
    settings = make_settings()
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    source, fork_bucket, tails = await _buckets(client, unique)
    fork = f"{fork_bucket}/fork"
    forked = TEXT | {"Stream-Forked-From": source, "Stream-Fork-Offset": tails[1]}
    assert (await client.put(fork, headers=forked)).status == 201
    assert (await client.post(fork, data=b"X", headers=TEXT)).status == 204
    await client.close()
    again = await aiohttp_client(create_app(settings))
    await wait_ready(again)
    assert await _read(again, fork) == b"abX"
    assert (await again.post(fork, data=b"Y", headers=TEXT)).status == 204
    assert await _read(again, fork, tails[0]) == b"bXY"
    assert await _read(again, source) == b"abc"
    kept = await again.delete(source.removesuffix("/src"))
    assert (kept.status, await _code(kept)) == (409, "bucket_not_empty")
    assert (await again.put(fork, headers=forked)).status == 200  # the same fork again
