"""Forks on a real broker: every status code of creation and deletion, reads across the fork
point, soft deletion and the cascade up a chain."""

from __future__ import annotations

import asyncio
import json

from aiohttp import ClientResponse

from adapter.http.keys import STREAMS
from adapter.protocol.offsets import encode
from tests.conftest import Client

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


async def _source(client: Client, unique: str, *bodies: bytes) -> tuple[str, list[str]]:
    """A bucket and a text stream in it with one message per body; the tail after each."""
    bucket = f"/fk-{unique}"
    assert (await client.put(bucket)).status == 201
    path = f"{bucket}/src"
    assert (await client.put(path, headers=TEXT)).status == 201
    tails = []
    for body in bodies:
        response = await client.post(path, data=body, headers=TEXT)
        assert response.status == 204
        tails.append(response.headers["Stream-Next-Offset"])
    return path, tails


def _fork_of(source: str, offset: str | None = None, **more: str) -> dict[str, str]:
    headers = {**TEXT, "Stream-Forked-From": source, **more}
    if offset is not None:
        headers["Stream-Fork-Offset"] = offset
    return headers


async def test_a_fork_reads_its_source_below_the_fork_point_then_its_own(
    client: Client, unique: str
) -> None:
    source, tails = await _source(client, unique, b"a", b"b", b"c")
    fork = source.replace("/src", "/fork")
    inheriting = {"Stream-Forked-From": source, "Stream-Fork-Offset": tails[1]}
    created = await client.put(fork, headers=inheriting, skip_auto_headers=("Content-Type",))
    assert created.status == 201
    assert created.headers["Content-Type"] == "text/plain"  # inherited
    assert (await client.post(fork, data=b"X", headers=TEXT)).status == 204
    assert (await client.post(source, data=b"d", headers=TEXT)).status == 204
    assert await _read(client, fork) == b"abX"
    assert await _read(client, source) == b"abcd"
    # The same tokens as the source's below the fork point.
    assert await _read(client, fork, tails[0]) == b"bX"
    assert await _read(client, fork, tails[1]) == b"X"
    streams = client.app[STREAMS]
    metas = [streams.catalog.stream(f"fk-{unique}", name) for name in ("src", "fork")]
    assert metas[0] is not None
    assert metas[1] is not None
    assert metas[1].partition == metas[0].partition  # whatever its own key hashes to


async def test_forks_of_many_names_all_live_in_the_sources_partition(
    client: Client, unique: str
) -> None:
    source, _ = await _source(client, unique, b"a")
    bucket_id = f"fk-{unique}"
    for index in range(12):
        fork = f"/{bucket_id}/f{index}"
        assert (await client.put(fork, headers=_fork_of(source))).status == 201
        assert await _read(client, fork) == b"a"
    catalog = client.app[STREAMS].catalog
    partitions = {catalog.stream(bucket_id, f"f{i}").partition for i in range(12)}  # type: ignore[union-attr]
    assert partitions == {catalog.stream(bucket_id, "src").partition}  # type: ignore[union-attr]


async def test_fork_creation_status_codes(client: Client, unique: str) -> None:
    source, tails = await _source(client, unique, b"hello")
    bucket = source.removesuffix("/src")
    fork = f"{bucket}/fork"
    missing = await client.put(fork, headers=_fork_of(f"{bucket}/nope"))
    assert (missing.status, await _code(missing)) == (404, "stream_not_found")
    beyond = await client.put(fork, headers=_fork_of(source, encode(10**9)))
    assert (beyond.status, await _code(beyond)) == (400, "invalid_offset")
    for bad in ("-1", "abc", "05", "+1"):
        response = await client.put(
            fork, headers=_fork_of(source, **{"Stream-Fork-Sub-Offset": bad})
        )
        assert response.status == 400
    no_source = await client.put(fork, headers={**TEXT, "Stream-Fork-Sub-Offset": "0"})
    assert no_source.status == 400
    overshoot = await client.put(fork, headers=_fork_of(source, **{"Stream-Fork-Sub-Offset": "1"}))
    assert overshoot.status == 400  # nothing follows the tail
    mismatch = await client.put(
        fork, headers=_fork_of(source, **{"Content-Type": "application/json"})
    )
    assert (mismatch.status, await _code(mismatch)) == (409, "content_type_mismatch")
    other_bucket = await client.put(fork, headers=_fork_of(f"/fk-none-{unique}/src"))
    assert (other_bucket.status, await _code(other_bucket)) == (404, "stream_not_found")
    malformed = await client.put(fork, headers=_fork_of("/a/b/c"))
    assert (malformed.status, await _code(malformed)) == (400, "invalid_header")
    headers = _fork_of(source, "0" * 16 + "_" + "0" * 16, **{"Stream-Fork-Sub-Offset": "3"})
    assert (await client.put(fork, headers=headers)).status == 201
    assert (await client.put(fork, headers=headers)).status == 200
    again = {**headers, "Stream-Fork-Sub-Offset": "2"}
    assert (await client.put(fork, headers=again)).status == 409
    assert (await client.put(fork, headers=TEXT)).status == 409  # a plain stream is other
    assert await _read(client, fork) == b"hel"
    assert tails


async def test_deleting_a_source_with_forks_soft_deletes_it(client: Client, unique: str) -> None:
    source, _ = await _source(client, unique, b"a")
    fork = source.replace("/src", "/fork")
    assert (await client.put(fork, headers=_fork_of(source))).status == 201
    assert (await client.delete(source)).status == 204
    for method in ("GET", "POST", "DELETE"):
        response = await client.request(method, source, params={"offset": "-1"}, headers=TEXT)
        assert (response.status, await _code(response)) == (410, "gone")
    assert (await client.head(source)).status == 410
    assert (await client.put(source, headers=TEXT)).status == 409
    again = await client.put(source.replace("/src", "/f2"), headers=_fork_of(source))
    assert (again.status, await _code(again)) == (409, "source_deleted")
    assert await _read(client, fork) == b"a"
    assert (await client.post(fork, data=b"b", headers=TEXT)).status == 204
    assert await _read(client, fork) == b"ab"
    assert (await client.delete(fork)).status == 204  # the last fork: the source goes too
    assert (await client.head(source)).status == 404
    assert (await client.put(source, headers=TEXT)).status == 201


async def test_deleting_the_last_fork_collects_up_a_chain(client: Client, unique: str) -> None:
    root, _ = await _source(client, unique, b"r")
    middle, leaf = root.replace("/src", "/mid"), root.replace("/src", "/leaf")
    assert (await client.put(middle, headers=_fork_of(root))).status == 201
    assert (await client.post(middle, data=b"m", headers=TEXT)).status == 204
    assert (await client.put(leaf, headers=_fork_of(middle))).status == 201
    assert (await client.post(leaf, data=b"l", headers=TEXT)).status == 204
    assert (await client.delete(root)).status == 204
    assert (await client.delete(middle)).status == 204
    assert await _read(client, leaf) == b"rml"
    assert (await client.head(root)).status == 410
    assert (await client.delete(leaf)).status == 204
    catalog = client.app[STREAMS].catalog
    bucket_id = root.split("/")[1]
    assert [catalog.stream(bucket_id, s) for s in ("src", "mid", "leaf")] == [None] * 3
    assert (await client.head(root)).status == 404


async def test_a_long_poll_on_a_fork_answers_inherited_data_then_waits_for_its_own(
    client: Client, unique: str
) -> None:
    source, _ = await _source(client, unique, b"a")
    fork = source.replace("/src", "/fork")
    created = await client.put(fork, headers=_fork_of(source))
    tail = created.headers["Stream-Next-Offset"]
    first = await client.get(fork, params={"offset": "-1", "live": "long-poll"})
    assert (first.status, await first.read()) == (200, b"a")
    assert first.headers["Stream-Next-Offset"] == tail
    waiting = client.get(fork, params={"offset": tail, "live": "long-poll"})
    assert (await client.post(fork, data=b"b", headers=TEXT)).status == 204
    response = await waiting
    assert (response.status, await response.read()) == (200, b"b")


async def test_an_expired_fork_does_not_keep_its_source(client: Client, unique: str) -> None:
    source, _ = await _source(client, unique, b"a")
    fork = source.replace("/src", "/fork")
    assert (await client.put(fork, headers=_fork_of(source, **{"Stream-TTL": "1"}))).status == 201
    await asyncio.sleep(1.2)
    assert (await client.head(fork)).status == 404
    assert (await client.delete(source)).status == 204
    assert (await client.head(source)).status == 404  # deleted outright, not soft


async def test_sources_whose_forks_all_expired_are_collected_by_the_sweep(
    client: Client, unique: str
) -> None:
    """A chain root <- middle <- leaf, root and middle soft-deleted for the leaf, which then
    expires: nothing is written by an expiry, so the sweep collects middle and root."""
    root, _ = await _source(client, unique, b"r")
    middle, leaf = root.replace("/src", "/mid"), root.replace("/src", "/leaf")
    other = root.replace("/src", "/other")
    assert (await client.put(middle, headers=_fork_of(root))).status == 201
    assert (await client.put(leaf, headers=_fork_of(middle, **{"Stream-TTL": "1"}))).status == 201
    assert (await client.put(other, headers=_fork_of(root))).status == 201
    assert (await client.delete(other)).status == 204  # root keeps no fork but middle
    assert (await client.delete(root)).status == 204
    assert (await client.delete(middle)).status == 204
    streams = client.app[STREAMS]
    assert await streams.sweep() == []  # the leaf is live: both stay, soft-deleted
    assert (await client.head(middle)).status == 410
    await asyncio.sleep(1.2)
    assert (await client.head(leaf)).status == 404
    assert (await client.head(root)).status == 410  # expiry alone writes nothing
    bucket_id = root.split("/")[1]
    assert await streams.sweep() == [(bucket_id, "mid")]  # the root goes with it
    assert [streams.catalog.stream(bucket_id, s) for s in ("src", "mid")] == [None, None]
    for path in (root, middle):
        assert (await client.head(path)).status == 404
        assert (await client.put(path, headers=TEXT)).status == 201
    assert await streams.sweep() == []  # idempotent


async def test_a_json_sub_offset_copies_whole_messages_and_may_cross_appends(
    client: Client, unique: str
) -> None:
    """Each JSON message is a record of its own, so every position a fork can take is a
    message boundary; a sub-offset counts whole messages from the fork offset, across the
    source's appends (the reference refuses past the first append: see architecture.md)."""
    json_type = {"Content-Type": "application/json"}
    bucket = f"/fk-{unique}"
    assert (await client.put(bucket)).status == 201
    source = f"{bucket}/doc"
    created = await client.put(source, headers=json_type)
    start = created.headers["Stream-Next-Offset"]
    first = await client.post(source, data=b'[{"a":1},{"b":2}]', headers=json_type)
    assert first.status == 204
    assert (await client.post(source, data=b'{"c":3}', headers=json_type)).status == 204

    async def fork(name: str, sub_offset: int) -> ClientResponse:
        headers = {**json_type, "Stream-Forked-From": source, "Stream-Fork-Offset": start}
        headers["Stream-Fork-Sub-Offset"] = str(sub_offset)
        return await client.put(f"{bucket}/{name}", headers=headers)

    assert (await fork("across", 3)).status == 201  # both of the first append, then the next
    assert json.loads(await _read(client, f"{bucket}/across")) == [{"a": 1}, {"b": 2}, {"c": 3}]
    assert (await fork("inside", 1)).status == 201
    appended = await client.post(f"{bucket}/inside", data=b'{"own":0}', headers=json_type)
    assert appended.status == 204
    assert json.loads(await _read(client, f"{bucket}/inside")) == [{"a": 1}, {"own": 0}]
    over = await fork("over", 4)
    assert (over.status, await _code(over)) == (400, "invalid_header")
