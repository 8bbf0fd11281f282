"""Conditional writes and fencing tokens over HTTP on the real broker: ETags on every append,
`If-Match` and `If-None-Match` on PUT and POST, 304 on HEAD, and a stream's fencing token set
by `POST {stream}/fence`, kept across a restart and an owner's kill and enforced on every
append."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest
from aiohttp import ClientResponse

from adapter.app import create_app
from tests.cluster import SLOTS, signal_adapter, stream_in, two_instances, until_owned
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready
from tests.tokens import token_file

pytestmark = pytest.mark.integration

TEXT = {"Content-Type": "text/plain"}


async def _code(response: ClientResponse) -> str:
    body = await response.json()
    code = body["error"]["code"]
    assert isinstance(code, str)
    return code


async def _stream(client: Client, unique: str) -> str:
    bucket = f"/wc-{unique}"
    assert (await client.put(bucket)).status == 201
    path = f"{bucket}/log"
    assert (await client.put(path, headers=TEXT)).status == 201
    return path


async def _etag(client: Client, path: str) -> str:
    return (await client.head(path)).headers["ETag"]


# -- conditional writes -----------------------------------------------------------------------


async def test_every_append_answers_the_streams_new_etag(client: Client, unique: str) -> None:
    path = await _stream(client, unique)
    before = await _etag(client, path)
    appended = await client.post(path, data=b"a", headers=TEXT)
    assert appended.status == 204
    assert appended.headers["ETag"] == await _etag(client, path) != before
    chained = await client.post(
        path, data=b"b", headers=TEXT | {"If-Match": appended.headers["ETag"]}
    )
    assert chained.status == 204
    stale = await client.post(path, data=b"c", headers=TEXT | {"If-Match": before})
    assert stale.status == 412
    assert await _code(stale) == "precondition_failed"
    read = await client.get(path, params={"offset": "-1"})
    assert await read.read() == b"ab"


async def test_if_match_races_between_two_writers_exactly_one_wins(
    client: Client, unique: str
) -> None:
    path = await _stream(client, unique)
    etag = await _etag(client, path)
    racing = [
        client.post(path, data=body, headers=TEXT | {"If-Match": etag}) for body in (b"1", b"2")
    ]
    statuses = sorted(response.status for response in await asyncio.gather(*racing))
    assert statuses == [204, 412]
    read = await client.get(path, params={"offset": "-1"})
    assert await read.read() in (b"1", b"2")


async def test_put_with_if_none_match_star_creates_only_if_absent(
    client: Client, unique: str
) -> None:
    bucket = f"/wc-{unique}"
    assert (await client.put(bucket)).status == 201
    absent = {"If-None-Match": "*"} | TEXT
    created = await client.put(f"{bucket}/new", headers=absent)
    assert created.status == 201
    assert created.headers["ETag"] == await _etag(client, f"{bucket}/new")
    again = await client.put(f"{bucket}/new", headers=absent)
    assert again.status == 412
    assert await _code(again) == "precondition_failed"
    assert (await client.put(f"{bucket}/new", headers=TEXT)).status == 200  # unconditional


async def test_put_with_if_match_needs_the_stream_with_that_etag(
    client: Client, unique: str
) -> None:
    path = await _stream(client, unique)
    bucket = path.rsplit("/", 1)[0]
    missing = await client.put(f"{bucket}/absent", headers=TEXT | {"If-Match": "*"})
    assert missing.status == 412
    assert (await client.head(f"{bucket}/absent")).status == 404  # nothing was created
    etag = await _etag(client, path)
    same = await client.put(path, headers=TEXT | {"If-Match": etag})
    assert same.status == 200
    assert same.headers["ETag"] == etag
    assert (await client.post(path, data=b"x", headers=TEXT)).status == 204
    stale = await client.put(path, headers=TEXT | {"If-Match": etag})
    assert stale.status == 412


async def test_head_answers_304_while_the_etag_held_is_current(client: Client, unique: str) -> None:
    path = await _stream(client, unique)
    etag = await _etag(client, path)
    unchanged = await client.head(path, headers={"If-None-Match": etag})
    assert unchanged.status == 304
    assert unchanged.headers["ETag"] == etag
    assert (await client.post(path, data=b"x", headers=TEXT)).status == 204
    changed = await client.head(path, headers={"If-None-Match": etag})
    assert changed.status == 200
    assert changed.headers["ETag"] != etag


# -- fencing tokens ---------------------------------------------------------------------------


async def _fence(client: Client, path: str, token: str) -> ClientResponse:
    return await client.post(f"{path}/fence", headers={"Stream-Fencing-Token": token})


async def _append(client: Client, path: str, body: bytes, token: str | None) -> ClientResponse:
    fencing = {} if token is None else {"Stream-Fencing-Token": token}
    return await client.post(path, data=body, headers=TEXT | fencing)


async def test_a_fence_admits_only_appends_carrying_its_token(client: Client, unique: str) -> None:
    path = await _stream(client, unique)
    assert (await _append(client, path, b"a", None)).status == 204
    assert (await _fence(client, path, "writer-1")).status == 204
    assert (await _append(client, path, b"b", "writer-1")).status == 204
    for token, says in ((None, "is required"), ("writer-0", "is not it")):
        refused = await _append(client, path, b"x", token)
        assert refused.status == 412
        body = await refused.json()
        assert body["error"]["code"] == "fencing_token_mismatch"
        assert says in body["error"]["message"]
        assert "writer-1" not in body["error"]["message"]
    assert (await _fence(client, path, "writer-2")).status == 204  # a new writer takes over
    assert (await _append(client, path, b"x", "writer-1")).status == 412
    assert (await _append(client, path, b"c", "writer-2")).status == 204
    read = await client.get(path, params={"offset": "-1"})
    assert await read.read() == b"abc"


async def test_a_retry_of_an_append_committed_before_a_fence_is_its_duplicate(
    client: Client, unique: str
) -> None:
    """A producer whose append committed but whose answer was lost retries it: the retry is
    the same append, so it gets the duplicate's 204 even after a fence went up meanwhile; a
    new append of that producer is the fence's to refuse."""
    path = await _stream(client, unique)
    producer = {"Producer-Id": "p", "Producer-Epoch": "0"}
    first = await client.post(path, data=b"a", headers=TEXT | producer | {"Producer-Seq": "0"})
    assert first.status == 200
    retry_unfenced = await client.post(
        path, data=b"a", headers=TEXT | producer | {"Producer-Seq": "0"}
    )
    assert retry_unfenced.status == 204
    assert (await _fence(client, path, "writer-1")).status == 204
    retry = await client.post(path, data=b"a", headers=TEXT | producer | {"Producer-Seq": "0"})
    assert retry.status == 204, await retry.text()
    for name in ("Stream-Next-Offset", "Producer-Epoch", "Producer-Seq"):
        assert retry.headers[name] == retry_unfenced.headers[name], name
    new = await client.post(path, data=b"b", headers=TEXT | producer | {"Producer-Seq": "1"})
    assert (new.status, await _code(new)) == (412, "fencing_token_mismatch")
    read = await client.get(path, params={"offset": "-1"})
    assert await read.read() == b"a"


async def test_a_fence_needs_a_valid_token_and_an_existing_stream(
    client: Client, unique: str
) -> None:
    path = await _stream(client, unique)
    no_token = await client.post(f"{path}/fence")
    assert (no_token.status, await _code(no_token)) == (400, "invalid_header")
    assert (await _fence(client, f"{path}-absent", "t")).status == 404
    unfenced = await _append(client, path, b"x", "t")
    assert (unfenced.status, await _code(unfenced)) == (412, "fencing_token_mismatch")
    flat = "/v1/stream/" + path.strip("/")
    assert (await _fence(client, flat, "t")).status == 204
    assert (await _append(client, path, b"x", "t")).status == 204


async def test_a_fencing_token_survives_a_restart_on_another_instance(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, tmp_path: Path, unique: str
) -> None:
    first = await aiohttp_client(create_app(make_settings()))
    await wait_ready(first)
    path = await _stream(first, unique)
    assert (await _fence(first, path, "writer-1")).status == 204
    await first.close()
    # Its own catalog folder: the token comes back from the meta topic alone.
    settings = make_settings(catalog_dir=str(tmp_path / "second-catalog"))
    second = await aiohttp_client(create_app(settings))
    await wait_ready(second)
    assert (await _append(second, path, b"x", None)).status == 412
    assert (await _append(second, path, b"y", "writer-1")).status == 204
    read = await second.get(path, params={"offset": "-1"})
    assert await read.read() == b"y"


async def test_a_fence_takes_an_append_or_an_admin_scope(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, tmp_path: Path, unique: str
) -> None:
    bucket = f"wc-{unique}"
    tokens = {
        "reader": ("reader-secret-token-0123456789", [f"read:{bucket}"]),
        "writer": ("writer-secret-token-0123456789", [f"append:{bucket}"]),
        "admin": ("admin-secret-token-01234567890", [f"admin:{bucket}"]),
    }
    path_file = token_file(tmp_path / "tokens.toml", tokens)
    settings = make_settings(auth_mode="static", auth_token_file=str(path_file))
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)

    def bearer(name: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {tokens[name][0]}"}

    assert (await client.put(f"/{bucket}", headers=bearer("admin"))).status == 201
    path = f"/{bucket}/log"
    assert (await client.put(path, headers=TEXT | bearer("admin"))).status == 201
    fence = f"{path}/fence"
    for name, status in (("reader", 403), ("writer", 204), ("admin", 204)):
        headers = bearer(name) | {"Stream-Fencing-Token": name}
        assert (await client.post(fence, headers=headers)).status == status


@pytest.mark.faults
@pytest.mark.timeout(300)
async def test_a_fencing_token_holds_across_an_owner_kill(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    prefix = f"fence{unique}."
    async with two_instances(kafka_bootstrap, prefix, tmp_path, total_s=60) as pair:
        session, a, b = pair.session, pair.a, pair.b
        stream = stream_in(prefix, pair.owners[a], "f")
        url = f"{b}/v1/stream/{stream}"  # through b: forwarded to a, the owner
        token = {"Stream-Fencing-Token": "writer-1"}
        assert (await session.put(url, headers=TEXT)).status == 201
        assert (await session.post(f"{url}/fence", headers=token)).status == 204
        signal_adapter(int(a.rsplit(":", 1)[1]), signal.SIGKILL)
        await until_owned(session, {b: SLOTS})
        async with session.post(url, data=b"x", headers=TEXT) as refused:
            assert refused.status == 412
            assert (await refused.json())["error"]["code"] == "fencing_token_mismatch"
        accepted = await session.post(url, data=b"y", headers=TEXT | token)
        assert accepted.status == 204
        async with session.get(url, params={"offset": "-1"}) as read:
            assert await read.read() == b"y"
