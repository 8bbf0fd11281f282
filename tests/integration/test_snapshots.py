"""Snapshots on a real broker and object store: every status code of publish, read and delete,
the retention a publish moves (410 below it), and what a restart keeps."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapter.app import PARTS, create_app
from adapter.objects.local import LocalObjectStore
from adapter.objects.s3 import S3ObjectStore
from adapter.protocol.commands import StreamRef
from adapter.protocol.snapshots import OBJECT_PREFIX, object_key
from adapter.service.snapshot_gc import SnapshotCollector, windowed
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready
from tests.services import S3Server

TEXT = {"Content-Type": "text/plain"}
BIG = 64 * 1024


async def _code(response: object) -> str:
    body = await response.json()  # type: ignore[attr-defined]
    code = body["error"]["code"]
    assert isinstance(code, str)
    return code


async def _stream(client: Client, unique: str, *bodies: bytes) -> tuple[str, list[str]]:
    """A bucket and a text stream with one message per body; the tail after each."""
    bucket = f"/sn-{unique}"
    assert (await client.put(bucket)).status == 201
    path = f"{bucket}/doc"
    created = await client.put(path, headers=TEXT)
    assert created.status == 201
    tails = [created.headers["Stream-Next-Offset"]]
    for body in bodies:
        response = await client.post(path, data=body, headers=TEXT)
        assert response.status == 204
        tails.append(response.headers["Stream-Next-Offset"])
    return path, tails


async def _publish(client: Client, path: str, offset: str, blob: bytes) -> int:
    headers = {"Content-Type": "application/x-state"}
    return (await client.put(f"{path}/snapshot/{offset}", data=blob, headers=headers)).status


async def test_publish_moves_retention_and_reads_below_answer_410(
    client: Client, unique: str
) -> None:
    path, tails = await _stream(client, unique, b"a", b"b", b"c")
    assert await _publish(client, path, tails[2], b"AB") == 204
    for offset in ("-1", tails[0], tails[1]):
        gone = await client.get(path, params={"offset": offset})
        assert gone.status == 410
        assert gone.headers["Stream-Earliest-Offset"] == tails[2]
        assert await _code(gone) == "offset_gone"
    kept = await client.get(path, params={"offset": tails[2]})
    assert (kept.status, await kept.read()) == (200, b"c")
    live = await client.get(path, params={"offset": tails[0], "live": "long-poll"})
    assert live.status == 410
    head = await client.head(path)
    assert head.headers["Stream-Snapshot-Offset"] == tails[2]


async def test_read_the_latest_and_at_an_offset(client: Client, unique: str) -> None:
    path, tails = await _stream(client, unique, b"a", b"b")
    assert "Stream-Snapshot-Offset" not in (await client.head(path)).headers
    assert (await client.get(f"{path}/snapshot", allow_redirects=False)).status == 404
    assert await _publish(client, path, tails[1], b"A") == 204
    redirect = await client.get(f"{path}/snapshot", allow_redirects=False)
    assert redirect.status == 307
    assert redirect.headers["Location"].endswith(f"{path}/snapshot/{tails[1]}")
    blob = await client.get(f"{path}/snapshot/{tails[1]}")
    assert blob.status == 200
    assert await blob.read() == b"A"
    assert blob.headers["Content-Type"] == "application/x-state"
    assert blob.headers["Stream-Snapshot-Offset"] == tails[1]
    assert blob.headers["Stream-Next-Offset"] == tails[1]
    assert blob.headers["Stream-Up-To-Date"] == "false"  # "b" follows it
    # Offsets in paths are URL-decoded.
    encoded = tails[1].replace("_", "%5F")
    assert (await client.get(f"{path}/snapshot/{encoded}")).status == 200
    assert (await client.get(f"{path}/snapshot/{tails[0]}")).status == 404


async def test_a_newer_snapshot_replaces_the_old_at_once(client: Client, unique: str) -> None:
    path, tails = await _stream(client, unique, b"a", b"b")
    assert await _publish(client, path, tails[1], b"A") == 204
    assert await _publish(client, path, tails[2], b"AB") == 204
    assert (await client.get(f"{path}/snapshot/{tails[1]}")).status == 404
    latest = await client.get(f"{path}/snapshot/{tails[2]}")
    assert (await latest.read(), latest.headers["Stream-Up-To-Date"]) == (b"AB", "true")
    assert await _publish(client, path, tails[1], b"A") == 410  # older than retained now


async def test_publish_refusals(
    client: Client, unique: str, make_settings: SettingsFactory
) -> None:
    path, tails = await _stream(client, unique, b"a")
    assert await _publish(client, path, "nonsense", b"x") == 400
    assert await _publish(client, path, "-1", b"x") == 400
    assert await _publish(client, path, "now", b"x") == 400
    beyond = f"0000000000000000_{int(tails[1][-16:]) + 5:016d}"
    assert await _publish(client, path, beyond, b"x") == 409
    missing = path.replace("/doc", "/nope")
    assert await _publish(client, missing, tails[0], b"x") == 404


async def test_a_snapshot_over_the_limit_is_413(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str
) -> None:
    client = await aiohttp_client(create_app(make_settings(max_snapshot_bytes=BIG)))
    await wait_ready(client)
    path, tails = await _stream(client, unique, b"a")
    assert await _publish(client, path, tails[1], b"x" * (BIG + 1)) == 413
    assert await _publish(client, path, tails[1], b"x" * BIG) == 204


async def _pieces(blob: bytes, size: int) -> AsyncIterator[bytes]:
    for start in range(0, len(blob), size):
        yield blob[start : start + size]


async def test_a_chunked_body_is_streamed_counted_and_refused_past_the_limit(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str, tmp_path: Path
) -> None:
    """Without a Content-Length the limit holds while streaming: nothing of a refused body
    is kept (no blob, no temp file), and an accepted one is stored with its size and SHA-256."""
    client = await aiohttp_client(create_app(make_settings(max_snapshot_bytes=BIG)))
    await wait_ready(client)
    path, tails = await _stream(client, unique, b"a")
    url = f"{path}/snapshot/{tails[1]}"
    refused = await client.put(url, data=_pieces(b"x" * (BIG + 1), 4096))
    assert (refused.status, await _code(refused)) == (413, "payload_too_large")
    cold = tmp_path / "cold"
    kept = [p for p in cold.rglob("*") if p.is_file()]
    markers = cold / "instances"  # the instance's markers (cluster/shared_folder.py) stay
    assert [p for p in kept if not p.is_relative_to(markers)] == []
    assert (await client.get(f"{path}/snapshot", allow_redirects=False)).status == 404
    blob = bytes(range(256)) * (BIG // 256)
    assert (await client.put(url, data=_pieces(blob, 1000))).status == 204
    parts = client.app[PARTS]
    pointer = parts.catalog.snapshot(
        parts.streams.native.existing(StreamRef(f"sn-{unique}", "doc"))
    )
    assert pointer is not None
    assert (pointer.size, pointer.sha256) == (len(blob), hashlib.sha256(blob).hexdigest())
    stored = await client.get(url)
    assert await stored.read() == blob


async def test_delete_follows_the_bootstrap_safety_rules(client: Client, unique: str) -> None:
    path, tails = await _stream(client, unique, b"a", b"b")
    assert (await client.delete(f"{path}/snapshot/{tails[1]}")).status == 404  # none yet
    assert await _publish(client, path, tails[1], b"A") == 204
    assert await _publish(client, path, tails[2], b"AB") == 204
    assert (await client.delete(f"{path}/snapshot/{tails[1]}")).status == 404  # superseded
    latest = await client.delete(f"{path}/snapshot/{tails[2]}")
    assert (latest.status, await _code(latest)) == (409, "snapshot_in_use")
    assert (await client.get(f"{path}/snapshot/{tails[2]}")).status == 200


async def test_a_deleted_stream_created_again_has_no_snapshot(client: Client, unique: str) -> None:
    path, tails = await _stream(client, unique, b"a")
    assert await _publish(client, path, tails[1], b"A") == 204
    assert (await client.delete(path)).status == 204
    assert (await client.put(path, headers=TEXT)).status == 201
    assert (await client.get(f"{path}/snapshot", allow_redirects=False)).status == 404
    assert (await client.get(path, params={"offset": "-1"})).status == 200


async def test_restart_keeps_snapshots_and_retention(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str
) -> None:
    first = await aiohttp_client(create_app(make_settings()))
    await wait_ready(first)
    path, tails = await _stream(first, unique, b"a", b"b")
    assert await _publish(first, path, tails[1], b"A") == 204
    await first.close()
    second = await aiohttp_client(create_app(make_settings()))
    await wait_ready(second)
    assert (await second.get(path, params={"offset": "-1"})).status == 410
    blob = await second.get(f"{path}/snapshot/{tails[1]}")
    assert (blob.status, await blob.read()) == (200, b"A")
    assert (await second.head(path)).headers["Stream-Snapshot-Offset"] == tails[1]


async def test_blobs_live_in_the_local_folder(client: Client, unique: str, tmp_path: Path) -> None:
    path, tails = await _stream(client, unique, b"a")
    assert await _publish(client, path, tails[1], b"local blob") == 204
    store = LocalObjectStore(tmp_path / "cold")
    keys = await store.keys("snapshots/")
    assert len(keys) == 1
    assert await store.get(keys[0]) == b"local blob"


async def test_blobs_live_in_s3(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str, s3: S3Server
) -> None:
    s3_settings = {
        "cold_backend": "s3",
        "s3_bucket": f"snap-{unique}",
        "s3_endpoint_url": s3.endpoint_url,
        "s3_access_key_id": s3.access_key_id,
        "s3_secret_access_key": s3.secret_access_key,
    }
    client = await aiohttp_client(create_app(make_settings(**s3_settings)))
    await wait_ready(client)
    path, tails = await _stream(client, unique, b"a")
    assert await _publish(client, path, tails[1], b"s3 blob") == 204
    blob = await client.get(f"{path}/snapshot/{tails[1]}")
    assert (blob.status, await blob.read()) == (200, b"s3 blob")
    store = S3ObjectStore(
        bucket=f"snap-{unique}",
        timeout_s=5,
        endpoint_url=s3.endpoint_url,
        access_key_id=s3.access_key_id,
        secret_access_key=s3.secret_access_key,
    )
    assert len(await store.keys("snapshots/")) == 1


@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_unknown_stream_is_404(client: Client, unique: str, method: str) -> None:
    path, tails = await _stream(client, unique)
    missing = path.replace("/doc", "/nope")
    response = await client.request(method, f"{missing}/snapshot/{tails[0]}")
    assert response.status == 404


async def test_superseded_and_orphaned_blobs_are_collected_after_the_grace_period(
    client: Client, unique: str
) -> None:
    parts = client.app[PARTS]
    # The publishing instance's grace period: its blobs' keys name half of it as their window.
    grace = parts.snapshots.grace_ms
    path, tails = await _stream(client, unique, b"a", b"b")
    gone_path = path.replace("/doc", "/gone")
    assert (await client.put(gone_path, headers=TEXT)).status == 201
    gone_tail = (await client.head(gone_path)).headers["Stream-Next-Offset"]
    assert await _publish(client, gone_path, gone_tail, b"G") == 204
    assert (await client.delete(gone_path)).status == 204
    assert await _publish(client, path, tails[1], b"A") == 204
    assert await _publish(client, path, tails[2], b"AB") == 204
    # An interrupted publish: its blob stored, its pointer never committed. Never visible.
    orphan = object_key(f"sn-{unique}", "doc", 0, windowed("interrupted", grace // 2))
    await parts.store.put(orphan, b"half")
    assert (await client.get(f"{path}/snapshot/{tails[2]}")).status == 200
    assert (await client.head(path)).headers["Stream-Snapshot-Offset"] == tails[2]
    assert len(await parts.store.keys(OBJECT_PREFIX)) == 4

    now = [0]
    # An instance given a far shorter grace period still leaves them all for twice the window.
    hasty = SnapshotCollector(
        parts.store, parts.catalog, parts.follower.caught_up, lambda: now[0], 1, 1
    )
    assert await hasty.collect_once() == []
    now[0] = 2 * (grace // 2) - 1
    assert await hasty.collect_once() == []
    now[0] = 0
    collector = SnapshotCollector(
        parts.store, parts.catalog, parts.follower.caught_up, lambda: now[0], grace, 1
    )
    assert await collector.collect_once() == []  # first seen unreferenced: the grace starts
    now[0] = grace - 1
    assert await collector.collect_once() == []
    now[0] = grace
    assert len(await collector.collect_once()) == 3  # superseded, deleted stream's, orphan
    [kept] = await parts.store.keys(OBJECT_PREFIX)
    assert await parts.store.get(kept) == b"AB"
    assert await collector.collect_once() == []  # idempotent
    blob = await client.get(f"{path}/snapshot/{tails[2]}")
    assert (blob.status, await blob.read()) == (200, b"AB")


async def test_the_flat_surface_has_the_same_snapshot_and_bootstrap_routes(
    client: Client, unique: str
) -> None:
    path = f"/v1/stream/flat-{unique}/doc"  # a stream id with a '/', in `_default`
    created = await client.put(path, headers=TEXT)
    assert created.status == 201
    tails = [created.headers["Stream-Next-Offset"]]
    for body in (b"a", b"b"):
        appended = await client.post(path, data=body, headers=TEXT)
        tails.append(appended.headers["Stream-Next-Offset"])
    assert await _publish(client, path, tails[1], b"A") == 204
    assert (await client.get(path, params={"offset": "-1"})).status == 410
    latest = await client.get(f"{path}/snapshot", allow_redirects=False)
    assert latest.status == 307
    assert latest.headers["Location"].endswith(f"{path}/snapshot/{tails[1]}")
    blob = await client.get(f"{path}/snapshot/{tails[1]}")
    assert (blob.status, await blob.read()) == (200, b"A")
    refused = await client.delete(f"{path}/snapshot/{tails[1]}")
    assert (refused.status, await _code(refused)) == (409, "snapshot_in_use")
    boot = await client.get(f"{path}/bootstrap")
    assert boot.headers["Stream-Snapshot-Offset"] == tails[1]
    assert b"\r\n\r\nA\r\n--" in await boot.read()
    # The same stream through its bucket, when the first segment is a bucket id.
    bucket_path, bucket_tails = await _stream(client, unique, b"x")
    flat_bucketed = f"/v1/stream{bucket_path}"
    assert await _publish(client, flat_bucketed, bucket_tails[1], b"X") == 204
    assert (await client.head(bucket_path)).headers["Stream-Snapshot-Offset"] == bucket_tails[1]


@pytest.mark.parametrize(
    ("suffix", "code"),
    [
        ("snapshot", "invalid_stream_id"),
        ("bootstrap", "invalid_stream_id"),
        ("fence", "invalid_stream_id"),
        ("trim", "invalid_stream_id"),
        ("snapshot/0", "invalid_offset"),  # a publish on the stream `sub-…`, token malformed
    ],
)
async def test_flat_stream_paths_that_name_a_sub_resource_are_not_created(
    client: Client, unique: str, suffix: str, code: str
) -> None:
    response = await client.put(f"/v1/stream/sub-{unique}/{suffix}", headers=TEXT)
    assert (response.status, await _code(response)) == (400, code)
    alone = await client.put(f"/v1/stream/{suffix.split('/')[0]}-{unique}", headers=TEXT)
    assert alone.status == 201  # only as a sub-path of another stream are they reserved
