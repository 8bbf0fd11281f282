"""The catalog bounded in memory: streams beyond its cache still served from its scratch index,
and that index rebuilt at start whatever file was left in its folder (adapter/state/store.py)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from adapter.app import PARTS, SETTINGS, create_app
from adapter.state.catalog import Catalog
from adapter.state.records import ProducerRecord, StreamMeta
from adapter.state.store import catalog_file_name
from tests.conftest import Client, ClientFactory, SettingsFactory
from tests.kafka_reads import compacted_entries

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
    read back from SQLite: a retry is still refused as a duplicate."""
    settings = make_settings(catalog_cache_entries=2, catalog_dir=str(tmp_path / "catalog"))
    client = await aiohttp_client(create_app(settings))
    await _ready(client)
    bucket = f"b-{unique}"
    await _populate(client, bucket)
    await _check_served(client, bucket)
    catalog = client.app[PARTS].catalog
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
    assert not path.exists()  # deleted at stop
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
