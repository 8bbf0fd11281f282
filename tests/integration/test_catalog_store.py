"""The catalog bounded in memory: streams beyond its cache still served from its index, that
index resumed at a restart from its checkpoint, and rebuilt from the log whenever the file
cannot be trusted (adapter/state/store.py, adapter/state/follower.py)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from adapter.app import PARTS, SETTINGS, create_app
from adapter.config import Settings
from adapter.parts import kafka_access, topic_layout
from adapter.protocol.model import ProducerRecord, StreamMeta
from adapter.state.catalog import Catalog
from adapter.state.store import catalog_file_name
from tests.conftest import Client, ClientFactory, SettingsFactory
from tests.kafka_reads import committed_records, compacted_entries
from topology.admin import TopologyAdmin
from topology.internal_records import stream_meta_key
from topology.naming import StateTopics

STREAMS = 12
TEXT = {"Content-Type": "text/plain"}


async def _ready(client: Client) -> None:
    """Ready, on a slow machine too: a restarted instance may wait out the group's session of
    the one before it (`owner_session_timeout_ms`) before it owns its slots."""
    for _ in range(1200):
        if (await client.get("/readyz")).status == 200:
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the adapter never became ready")


def _producer(seq: int) -> dict[str, str]:
    return {**TEXT, "Producer-Id": "p", "Producer-Epoch": "0", "Producer-Seq": str(seq)}


async def _populate(client: Client, bucket: str) -> None:
    assert (await client.put(f"/{bucket}")).status == 201
    for n in range(STREAMS):
        path = f"/{bucket}/s{n:02d}"
        assert (await client.put(path, data=f"{n}:".encode(), headers=TEXT)).status == 201
        assert (await client.post(path, data=b"a", headers=_producer(0))).status == 200


async def _check_served(client: Client, bucket: str) -> None:
    """Every stream reads back, a retried producer append is a duplicate, the next one is new."""
    for n in range(STREAMS):
        path = f"/{bucket}/s{n:02d}"
        assert await (await client.get(f"{path}?offset=-1")).read() == f"{n}:a".encode()
    for n in range(STREAMS):
        path = f"/{bucket}/s{n:02d}"
        assert (await client.post(path, data=b"a", headers=_producer(0))).status == 204
    for n in range(STREAMS):
        path = f"/{bucket}/s{n:02d}"
        assert (await client.post(path, data=b"b", headers=_producer(1))).status == 200
        assert await (await client.get(f"{path}?offset=-1")).read() == f"{n}:ab".encode()
    listed = await (await client.get(f"/{bucket}/streams?limit=1000")).json()
    assert [s["stream_id"] for s in listed["streams"]] == [f"s{n:02d}" for n in range(STREAMS)]


def _replayed(client: Client) -> Catalog:
    """A fresh catalog: the state topics as compaction could leave them, applied in order."""
    topics, bootstrap = client.app[PARTS].buckets.topics, client.app[SETTINGS].bootstrap_servers
    replayed = Catalog()
    for key, value in compacted_entries(bootstrap, topics.meta):
        replayed.apply(key, value)
    for key, value in compacted_entries(bootstrap, topics.producers):
        replayed.apply_producer(key, value)
    return replayed


def _state(
    catalog: Catalog, bucket: str
) -> list[tuple[StreamMeta | None, dict[str, ProducerRecord]]]:
    return [
        (catalog.stream(bucket, f"s{n:02d}"), catalog.producers(bucket, f"s{n:02d}"))
        for n in range(STREAMS)
    ]


async def test_streams_beyond_the_cache_are_served_from_the_index(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str, tmp_path: Path
) -> None:
    """With 2 cached entries, every stream's state, producer state included, is evicted and
    read back from SQLite: a retry is still refused as a duplicate. The state topics say the
    same once the slots' checkpoint has written what the pure appends (format level 7) left
    unwritten."""
    settings = make_settings(
        catalog_cache_entries=2, catalog_dir=str(tmp_path / "catalog"), slot_checkpoint_ms=200
    )
    client = await aiohttp_client(create_app(settings))
    await _ready(client)
    bucket = f"b-{unique}"
    await _populate(client, bucket)
    await _check_served(client, bucket)
    catalog = client.app[PARTS].catalog
    for _ in range(100):  # the next checkpoint, within its interval
        if _state(catalog, bucket) == _state(_replayed(client), bucket):
            break
        await asyncio.sleep(0.2)
    assert _state(catalog, bucket) == _state(_replayed(client), bucket)
    assert catalog.stream_count(bucket) == STREAMS


@pytest.mark.parametrize("leftover", ["corrupt", "stale"])
async def test_a_start_over_a_leftover_file_rebuilds_the_catalog(
    aiohttp_client: ClientFactory,
    make_settings: SettingsFactory,
    unique: str,
    tmp_path: Path,
    leftover: str,
) -> None:
    """A file left by a crash (garbage, or a valid index of another state) is discarded: the
    restarted instance serves exactly what a fresh replay of the log says."""
    folder = tmp_path / "catalog"
    settings = make_settings(catalog_cache_entries=4, catalog_dir=str(folder))
    first = await aiohttp_client(create_app(settings))
    await _ready(first)
    bucket = f"b-{unique}"
    await _populate(first, bucket)
    path = folder / f"{catalog_file_name(settings.topic_prefix)}.0.sqlite3"
    assert path.exists()
    await first.close()
    for each in path.parent.glob(path.name + "*"):  # a crash before any checkpoint
        each.unlink()
    if leftover == "corrupt":
        path.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4096)
    else:  # a phantom stream, and no producer state for the real ones
        db = sqlite3.connect(path)
        db.execute("CREATE TABLE streams (bucket, stream, forked_from, soft_deleted, value)")
        db.execute("INSERT INTO streams VALUES (?, 'phantom', NULL, 0, x'00')", (bucket,))
        db.commit()
        db.close()
    second = await aiohttp_client(create_app(settings))
    await _ready(second)
    catalog = second.app[PARTS].catalog
    assert catalog.stream(bucket, "phantom") is None
    assert _state(catalog, bucket) == _state(_replayed(second), bucket)
    await _check_served(second, bucket)


def _checkpoint(path: Path) -> dict[str, Any]:
    db = sqlite3.connect(path)
    try:
        (value,) = db.execute("SELECT value FROM checkpoint").fetchone()
    finally:
        db.close()
    document: dict[str, Any] = json.loads(value)
    return document


def _records_from(bootstrap: str, topics: StateTopics, starts: dict[str, int]) -> int:
    """Committed records of the state topics at or past `starts` (0 where not given)."""
    return sum(
        1
        for topic in topics.by_kind().values()
        for offset, _value in committed_records(bootstrap, topic)
        if offset >= starts.get(topic, 0)
    )


async def _replayed_records(client: Client) -> int:
    body = await (await client.get("/readyz")).json()
    return int(body["checks"]["catalog"]["replayed_records"])


async def _populated_then_stopped(
    aiohttp_client: ClientFactory, settings: Settings, bucket: str
) -> Path:
    """Serve, fill `bucket`, stop; the path of the catalog file the stop left."""
    first = await aiohttp_client(create_app(settings))
    await _ready(first)
    await _populate(first, bucket)
    await first.close()
    return Path(settings.catalog_dir) / f"{catalog_file_name(settings.topic_prefix)}.0.sqlite3"


async def test_a_restart_resumes_from_the_checkpoint(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str, tmp_path: Path
) -> None:
    """Stopped, an instance leaves its index with a checkpoint; while it is down another one
    appends to half the streams and deletes one. Restarted, it applies exactly the records
    past the checkpoint (and the small owners and tier topics whole), and serves every stream
    as a replay of the whole log says."""
    settings = make_settings(catalog_cache_entries=4, catalog_dir=str(tmp_path / "catalog"))
    topics, bootstrap = StateTopics.of(settings.topic_prefix), settings.bootstrap_servers
    bucket = f"b-{unique}"
    path = await _populated_then_stopped(aiohttp_client, settings, bucket)
    assert path.exists()  # kept at stop
    positions: dict[str, int] = _checkpoint(path)["positions"]
    assert positions[topics.meta] > 0
    assert positions[topics.producers] > 0

    other = await aiohttp_client(
        create_app(replace(settings, catalog_dir=str(tmp_path / "other-catalog")))
    )
    await _ready(other)
    q = {**TEXT, "Producer-Id": "q", "Producer-Epoch": "0", "Producer-Seq": "0"}
    for n in range(6):
        assert (await other.post(f"/{bucket}/s{n:02d}", data=b"c", headers=q)).status == 200
    assert (await other.delete(f"/{bucket}/s11")).status == 204
    await other.close()

    expected = _records_from(bootstrap, topics, positions)
    assert expected < _records_from(bootstrap, topics, {})
    second = await aiohttp_client(create_app(settings))
    await _ready(second)
    assert await _replayed_records(second) == expected
    catalog = second.app[PARTS].catalog
    assert _state(catalog, bucket) == _state(_replayed(second), bucket)
    assert catalog.stream_count(bucket) == STREAMS - 1
    for n in range(STREAMS - 1):
        path_n = f"/{bucket}/s{n:02d}"
        body = f"{n}:a{'c' if n < 6 else ''}".encode()
        assert await (await second.get(f"{path_n}?offset=-1")).read() == body
        assert (await second.post(path_n, data=b"a", headers=_producer(0))).status == 204
    for n in range(6):
        retry = await second.post(f"/{bucket}/s{n:02d}", data=b"c", headers=q)
        assert retry.status == 204
    assert (await second.get(f"/{bucket}/s11?offset=-1")).status == 404
    listed = await (await second.get(f"/{bucket}/streams?limit=1000")).json()
    assert [s["stream_id"] for s in listed["streams"]] == [f"s{n:02d}" for n in range(11)]


@pytest.mark.parametrize("why", ["recreated", "other-cluster"])
async def test_a_checkpoint_the_log_can_no_longer_serve_rebuilds(
    aiohttp_client: ClientFactory,
    make_settings: SettingsFactory,
    unique: str,
    tmp_path: Path,
    why: str,
) -> None:
    """The state topics deleted and created again (new topic ids), or the file naming another
    cluster: the restarted instance rebuilds from what the log holds, not from its file."""
    settings = make_settings(catalog_cache_entries=4, catalog_dir=str(tmp_path / "catalog"))
    topics = StateTopics.of(settings.topic_prefix)
    bucket = f"b-{unique}"
    path = await _populated_then_stopped(aiohttp_client, settings, bucket)
    if why == "recreated":  # new topics: new topic ids, and the old records are gone
        admin = TopologyAdmin(kafka_access(settings), topic_layout(settings), 10)
        await admin.delete_topics(list(topics.by_kind().values()))
        for _ in range(300):
            if not any([await admin.topic_exists(t) for t in topics.by_kind().values()]):
                break
            await asyncio.sleep(0.1)
    else:
        db = sqlite3.connect(path)
        value = json.loads(db.execute("SELECT value FROM checkpoint").fetchone()[0])
        value["identity"]["cluster"] = "another-cluster"
        db.execute("UPDATE checkpoint SET value = ?", (json.dumps(value),))
        db.commit()
        db.close()

    second = await aiohttp_client(create_app(settings))
    await _ready(second)
    assert second.app[PARTS].follower.resumed_from is None
    catalog = second.app[PARTS].catalog
    assert _state(catalog, bucket) == _state(_replayed(second), bucket)
    if why == "recreated":  # the streams' records are gone from the log, and so from it
        assert catalog.stream(bucket, "s05") is None
        assert (await second.get(f"/{bucket}/s05?offset=-1")).status == 404
    else:
        await _check_served(second, bucket)


async def test_expired_streams_leave_the_index_unless_a_live_fork_reads_them(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str
) -> None:
    """The sweep forgets an expired stream through the log (its row leaves the index, its name
    answers 404 and can be created again) but keeps an expired source a live fork reads."""
    settings = make_settings(catalog_cache_entries=2, expired_gc_grace_ms=0)
    client = await aiohttp_client(create_app(settings))
    await _ready(client)
    bucket = f"b-{unique}"
    assert (await client.put(f"/{bucket}")).status == 201
    short = {**TEXT, "Stream-TTL": "1"}
    assert (await client.put(f"/{bucket}/gone", data=b"g", headers=short)).status == 201
    assert (await client.put(f"/{bucket}/src", data=b"x", headers=short)).status == 201
    fork = {**TEXT, "Stream-Forked-From": f"/{bucket}/src", "Stream-TTL": "3600"}
    forked = await client.put(f"/{bucket}/fork", headers=fork)
    assert forked.status == 201, await forked.text()
    assert (await client.put(f"/{bucket}/kept", data=b"k", headers=TEXT)).status == 201
    catalog, streams = client.app[PARTS].catalog, client.app[PARTS].streams
    for _ in range(100):  # until both have expired (TTL 1 s)
        if await streams.sweep_expired(0):
            break
        await asyncio.sleep(0.1)
    assert catalog.store.stream((bucket, "gone")) is None
    assert catalog.store.stream((bucket, "src")) is not None  # the fork reads it
    assert catalog.store.stream_count(bucket) == 3
    assert (bucket, "gone") not in [(m.bucket_id, m.stream_id) for m in catalog.expired(2**62)]
    meta = dict(
        compacted_entries(settings.bootstrap_servers, StateTopics.of(settings.topic_prefix).meta)
    )
    assert meta[stream_meta_key(bucket, "gone")] is None  # a tombstone: every instance forgets it
    assert (await client.get(f"/{bucket}/gone?offset=-1")).status == 404
    assert (await client.get(f"/{bucket}/src?offset=-1")).status == 404
    assert await (await client.get(f"/{bucket}/fork?offset=-1")).read() == b"x"
    assert await (await client.get(f"/{bucket}/kept?offset=-1")).read() == b"k"
    assert (await client.put(f"/{bucket}/gone", data=b"2", headers=TEXT)).status == 201
    assert await (await client.get(f"/{bucket}/gone?offset=-1")).read() == b"2"
