"""Trims over HTTP on the real broker and object store: `POST {stream}/trim` makes a stream's
older messages unreadable at once (410 with `Stream-Earliest-Offset`), never moves back, needs
the admin scope, survives a restart, and frees Kafka and the cold tier by the same path as a
snapshot's retention, a fork made before it keeping its own range."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest
from aiohttp import ClientResponse

from adapter.app import PARTS, create_app
from adapter.config import Settings
from adapter.service.tier_gc import TierCollector
from adapter.tier import chunks
from tests.cluster import SLOTS, signal_adapter, stream_in, two_instances, until_owned
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready
from tests.integration.test_retention import _bootstrap, _pass
from tests.integration.test_tiering import catch_up, manifest, tier_settings, tier_until_done
from tests.services import S3Server
from tests.tokens import token_file
from topology.naming import InternalTopic, internal_topic
from topology.slots import SlotMap
from topology.wire import decode_token

pytestmark = pytest.mark.integration

TEXT = {"Content-Type": "text/plain"}
EARLIEST = "Stream-Earliest-Offset"


async def _stream(client: Client, bucket: str, name: str = "log") -> str:
    if (await client.get(f"/{bucket}")).status == 404:
        assert (await client.put(f"/{bucket}")).status == 201
    path = f"/{bucket}/{name}"
    assert (await client.put(path, headers=TEXT)).status == 201
    return path


async def _append(client: Client, path: str, body: bytes) -> str:
    response = await client.post(path, data=body, headers=TEXT)
    assert response.status == 204, await response.text()
    return response.headers["Stream-Next-Offset"]


async def _rounds(client: Client, bucket: str, names: tuple[str, ...], rounds: range) -> None:
    for round_ in rounds:
        for name in names:
            await _append(client, f"/{bucket}/{name}", f"{name}-{round_:02d} ".encode() * 40)


async def _trim(client: Client, path: str, before: str, **headers: str) -> ClientResponse:
    return await client.post(f"{path}/trim", json={"before": before}, headers=headers)


async def _code(response: ClientResponse) -> str:
    code = (await response.json())["error"]["code"]
    assert isinstance(code, str)
    return code


async def test_a_trim_makes_older_messages_gone_at_once_and_never_moves_back(
    client: Client, unique: str
) -> None:
    path = await _stream(client, f"tr-{unique}")
    await _append(client, path, b"a1")
    first = await _append(client, path, b"a2")
    cut = await _append(client, path, b"a3")
    tail = await _append(client, path, b"a4")

    before = (await client.head(path)).headers["ETag"]
    trimmed = await _trim(client, path, cut)
    assert trimmed.status == 204
    assert (trimmed.headers[EARLIEST], trimmed.headers["Stream-Next-Offset"]) == (cut, tail)
    head = await client.head(path, headers={"If-None-Match": before})  # what it holds changed
    assert head.status == 200
    assert head.headers["ETag"] != before
    assert (await client.head(path, headers={"If-None-Match": head.headers["ETag"]})).status == 304
    for offset in ("-1", first):
        for live in ({}, {"live": "long-poll"}, {"live": "sse"}):
            gone = await client.get(path, params={"offset": offset} | live)
            assert gone.status == 410, (offset, live)
            assert gone.headers[EARLIEST] == cut
            assert await _code(gone) == "offset_gone"
    kept = await client.get(path, params={"offset": cut})
    assert (kept.status, await kept.read()) == (200, b"a4")
    assert await _bootstrap(client, path) == [b"", b"a4"]  # no snapshot: what is left

    backwards = await _trim(client, path, first)  # a no-op answering where it stands
    assert (backwards.status, backwards.headers[EARLIEST]) == (204, cut)
    flat = "/v1/stream/" + path.strip("/")
    everything = await _trim(client, flat, "now")
    assert (everything.status, everything.headers[EARLIEST]) == (204, tail)
    assert (await client.get(path, params={"offset": cut})).status == 410
    assert await _append(client, path, b"a5") > tail  # appends go on after a trim
    after = await client.get(path, params={"offset": tail})
    assert (after.status, await after.read()) == (200, b"a5")


async def test_a_trim_that_removes_no_message_past_a_snapshot_keeps_it(
    client: Client, unique: str
) -> None:
    await _trims_past_a_snapshot(client, f"tr-{unique}")


async def test_a_trim_past_a_tiered_snapshot_looks_for_messages_in_the_chunks(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str, s3: S3Server
) -> None:
    settings = tier_settings(make_settings, s3, unique, tier_interval_ms=3_600_000)
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    await _trims_past_a_snapshot(client, f"tt-{unique}", tiered=settings)


async def _trims_past_a_snapshot(
    client: Client, bucket: str, tiered: Settings | None = None
) -> None:
    """The stream shares its partition: offsets past its snapshot with none of its messages
    between name the snapshot's position. A trim there (by offset or by time) removes nothing,
    so `/bootstrap` still starts with the snapshot; one past a later message hides it.
    `tiered` (its settings): what lies past the snapshot is read from the cold tier's chunks."""
    path, other = await _stream(client, bucket), await _stream(client, bucket, "other")
    await _append(client, path, b"a1")
    at_snapshot = await _append(client, path, b"a2")
    publish = {"Content-Type": "application/octet-stream"}
    published = await client.put(f"{path}/snapshot/{at_snapshot}", data=b"state", headers=publish)
    assert published.status == 204
    for round_ in range(3):  # another stream's records past the snapshot's offset
        past = await _append(client, other, f"o{round_} ".encode() * 40)
    await asyncio.sleep(0.05)  # a3's record is written after this moment, the others before
    moment = int(time.time() * 1000)
    await asyncio.sleep(0.05)
    after = await _append(client, path, b"a3")
    if tiered is not None:
        await _rounds(client, bucket, ("other",), range(24))  # a3 past the hot window
        assert await tier_until_done(client) > 0
        holding_a3 = [
            chunk
            for tier_range in manifest(tiered)
            for chunk in tier_range.chunks
            if chunk.stream_id == "log" and chunk.last_offset >= decode_token(past)
        ]
        assert holding_a3
    for body in ({"before": past}, {"at": moment}):
        trimmed = await client.post(f"{path}/trim", json=body)
        assert trimmed.status == 204, body
        assert await _bootstrap(client, path) == [b"state", b"a3"], body
        assert trimmed.headers[EARLIEST] == at_snapshot, body  # where it stood: a no-op
        booted = await client.get(f"{path}/bootstrap")
        assert booted.headers["Stream-Snapshot-Offset"] == at_snapshot
    await _append(client, path, b"a4")
    hidden = await _trim(client, path, after)  # a3 is removed: the snapshot rebuilds nothing
    assert (hidden.status, hidden.headers[EARLIEST]) == (204, after)
    assert await _bootstrap(client, path) == [b"", b"a4"]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"not json", 400, "invalid_json"),
        (b'{"before": 3}', 400, "invalid_trim"),
        (b'{"at": "new year"}', 400, "invalid_time"),
        (b'{"at": 1, "before": "now"}', 400, "invalid_trim"),
        (b'{"before": "0003"}', 400, "invalid_offset"),
        (b'{"before": "0000000000000000_0000000099999999"}', 400, "trim_beyond_tail"),
    ],
)
async def test_bad_trims_are_refused_precisely_and_change_nothing(
    client: Client, unique: str, body: bytes, status: int, code: str
) -> None:
    path = await _stream(client, f"tb-{unique}")
    await _append(client, path, b"a1")
    refused = await client.post(f"{path}/trim", data=body)
    assert (refused.status, await _code(refused)) == (status, code)
    kept = await client.get(path, params={"offset": "-1"})
    assert (kept.status, await kept.read()) == (200, b"a1")


async def test_a_trim_of_an_absent_stream_is_404(client: Client, unique: str) -> None:
    path = await _stream(client, f"ta-{unique}")
    missing = await _trim(client, f"{path}-absent", "now")
    assert (missing.status, await _code(missing)) == (404, "stream_not_found")


async def test_a_trim_needs_the_admin_scope(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, tmp_path: Path, unique: str
) -> None:
    bucket = f"ts-{unique}"
    tokens = {
        "reader": ("reader-secret-token-0123456789", [f"read:{bucket}"]),
        "writer": ("writer-secret-token-0123456789", [f"append:{bucket}", f"read:{bucket}"]),
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
    appended = await client.post(path, data=b"x", headers=TEXT | bearer("writer"))
    tail = appended.headers["Stream-Next-Offset"]
    for name, status in (("reader", 403), ("writer", 403), ("admin", 204)):
        assert (await _trim(client, path, tail, **bearer(name))).status == status, name
    gone = await client.get(path, params={"offset": "-1"}, headers=bearer("reader"))
    assert (gone.status, gone.headers[EARLIEST]) == (410, tail)


async def test_a_trim_survives_a_restart(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, tmp_path: Path, unique: str
) -> None:
    first = await aiohttp_client(create_app(make_settings()))
    await wait_ready(first)
    path = await _stream(first, f"tr-{unique}")
    await _append(first, path, b"a1")
    cut = await _append(first, path, b"a2")
    await _append(first, path, b"a3")
    assert (await _trim(first, path, cut)).status == 204
    await first.close()
    # Its own catalog folder: the trim comes back from the meta topic alone.
    second = await aiohttp_client(
        create_app(make_settings(catalog_dir=str(tmp_path / "second-catalog")))
    )
    await wait_ready(second)
    gone = await second.get(path, params={"offset": "-1"})
    assert (gone.status, gone.headers[EARLIEST]) == (410, cut)
    kept = await second.get(path, params={"offset": cut})
    assert (kept.status, await kept.read()) == (200, b"a3")
    again = await _trim(second, path, "-1")
    assert (again.status, again.headers[EARLIEST]) == (204, cut)


async def test_trims_free_kafka_below_what_every_stream_and_fork_needs(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str
) -> None:
    # One partition, no background passes: only the passes run here free anything.
    settings = make_settings(partitions=1, tier_interval_ms=600_000)
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    bucket = f"tk-{unique}"
    a = await _stream(client, bucket, "a")
    created_b = await client.put(f"/{bucket}/b", headers=TEXT)
    b_start = decode_token(created_b.headers["Stream-Next-Offset"]) - 1  # its create record
    a_first = await _append(client, a, b"a1")
    fork = {"Stream-Forked-From": a, "Stream-Fork-Offset": a_first}
    assert (await client.put(f"/{bucket}/f", headers=fork | TEXT)).status == 201
    b_cut = await _append(client, f"/{bucket}/b", b"b1")
    a_cut = await _append(client, a, b"a2")
    await _append(client, a, b"a3")
    assert (await _trim(client, a, a_cut)).status == 204
    assert (await _trim(client, f"/{bucket}/b", b_cut)).status == 204

    # Within the grace period nothing goes; past it, the fork (made before the trim) still
    # reads `a1`, so `a`'s history start holds the partition back.
    assert await _pass(client, settings, bucket, after_grace=False) == 0
    assert await _pass(client, settings, bucket, after_grace=True) == 0
    kept = await client.get(f"/{bucket}/f", params={"offset": "-1"})
    assert (kept.status, await kept.read()) == (200, b"a1")
    assert (await client.delete(f"/{bucket}/f")).status == 204
    freed = await _pass(client, settings, bucket, after_grace=True)
    assert freed == decode_token(b_cut)  # the least of what `a` and `b` still need
    assert b_start < freed < decode_token(a_cut)
    await _append(client, f"/{bucket}/b", b"b2")  # past `a`'s trim point
    assert (await _trim(client, f"/{bucket}/b", "now")).status == 204
    assert await _pass(client, settings, bucket, after_grace=True) == decode_token(a_cut)
    assert await _bootstrap(client, a) == [b"", b"a3"]


async def test_a_trimmed_tiered_streams_chunks_are_collected(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str, s3: S3Server
) -> None:
    settings = tier_settings(make_settings, s3, unique, tier_interval_ms=3_600_000)
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    bucket = f"tt-{unique}"
    names = ("keep", "cut")
    for name in names:
        await _stream(client, bucket, name)
    # Tiered in two passes, so each stream's history is in two chunks at least: the trim
    # point falls after the first pass's and before the second's end.
    await _rounds(client, bucket, names, range(10))
    assert await tier_until_done(client) > 0
    mid = (await client.head(f"/{bucket}/cut")).headers["Stream-Next-Offset"]
    await _rounds(client, bucket, names, range(10, 20))
    assert await tier_until_done(client) > 0
    kept_reference = await catch_up(client, f"/{bucket}/keep", "-1")
    rest_reference = await catch_up(client, f"/{bucket}/cut", mid)
    parts = client.app[PARTS]
    collector = TierCollector(
        parts.catalog,
        parts.writers,
        SlotMap(settings.topic_prefix, settings.write_slots),
        parts.store,
        internal_topic(settings.topic_prefix, InternalTopic.TIER),
        parts.follower.caught_up,
        lambda: int(time.time() * 1000),
        grace_ms=0,  # orphans go in the pass that finds them, and trims are settled at once
        interval_s=3600,
    )
    assert await collector.collect_once() == (0, [])  # every chunk is read by some stream
    listed = {c.object_key: c for r in manifest(settings) for c in r.chunks}
    cut = decode_token(mid)

    trimmed = await _trim(client, f"/{bucket}/cut", mid)
    assert (trimmed.status, trimmed.headers[EARLIEST]) == (204, mid)
    changed, deleted = await collector.collect_once()
    gone = {k for k, c in listed.items() if c.stream_id == "cut" and c.last_offset < cut}
    assert gone
    assert any(c.stream_id == "cut" and c.last_offset >= cut for c in listed.values())
    assert changed > 0
    assert set(deleted) == gone
    assert set(await parts.store.keys(chunks.OBJECT_PREFIX)) == set(listed) - gone
    assert await catch_up(client, f"/{bucket}/keep", "-1") == kept_reference
    assert await catch_up(client, f"/{bucket}/cut", mid) == rest_reference
    below = await client.get(f"/{bucket}/cut", params={"offset": "-1"})
    assert (below.status, below.headers[EARLIEST]) == (410, mid)


@pytest.mark.faults
@pytest.mark.timeout(300)
async def test_a_trim_through_another_instance_holds_there_at_once_and_across_an_owner_kill(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    prefix = f"trim{unique}."
    async with two_instances(kafka_bootstrap, prefix, tmp_path, total_s=60) as pair:
        session, a, b = pair.session, pair.a, pair.b
        url = f"{b}/v1/stream/{stream_in(prefix, pair.owners[a], 't')}"  # forwarded to a
        assert (await session.put(url, headers=TEXT)).status == 201
        tokens = []
        for body in (b"a1", b"a2", b"a3"):
            async with session.post(url, data=body, headers=TEXT) as appended:
                assert appended.status == 204
                tokens.append(appended.headers["Stream-Next-Offset"])
        cut = tokens[1]
        async with session.post(f"{url}/trim", json={"before": cut}) as trimmed:
            assert (trimmed.status, trimmed.headers[EARLIEST]) == (204, cut)
        async with session.get(url, params={"offset": "-1"}) as gone:  # b's catalog shows it
            assert (gone.status, gone.headers[EARLIEST]) == (410, cut)
        signal_adapter(int(a.rsplit(":", 1)[1]), signal.SIGKILL)
        await until_owned(session, {b: SLOTS})
        async with session.get(url, params={"offset": tokens[0]}) as gone:
            assert (gone.status, gone.headers[EARLIEST]) == (410, cut)
        async with session.get(url, params={"offset": cut}) as kept:
            assert (kept.status, await kept.read()) == (200, b"a3")
        async with session.post(f"{url}/trim", json={"before": tokens[0]}) as backwards:
            assert (backwards.status, backwards.headers[EARLIEST]) == (204, cut)
