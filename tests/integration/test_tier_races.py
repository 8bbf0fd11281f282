"""The cold tier where its workers meet each other and the streams' lifecycle, on a real broker
and MinIO: a tier pass redone while the orphan sweep runs, the collector under a reader that
began before a newer snapshot, and a bucket deleted and created again during a pass."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterable, Awaitable, Callable

import pytest

from adapter.app import PARTS, SETTINGS, create_app
from adapter.log.errors import LogUnavailable
from adapter.objects.base import Fetched, ObjectStore
from adapter.protocol.commands import StreamRef
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.service.snapshots import Bootstrap, SnapshotService
from adapter.service.tier_gc import TierCollector
from adapter.tier import chunks
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready
from tests.integration.test_tiering import catch_up, log_start, manifest, tier_settings
from tests.services import S3Server
from topology.errors import TopologyError
from topology.naming import InternalTopic, bucket_topic, internal_topic
from topology.slots import SlotMap

TEXT = {"Content-Type": "text/plain"}
STATE = {"Content-Type": "application/x-state"}


class Clock:
    """A wall clock in milliseconds that a test moves by hand."""

    def __init__(self) -> None:
        self.now = int(time.time() * 1000)

    def __call__(self) -> int:
        return self.now


class HookedStore:
    """A real store whose `put` runs a test's hook once the object is stored (the n-th put
    runs `hooks[n]`, if any): a point between a tier pass's upload and its commit."""

    def __init__(self, inner: ObjectStore, hooks: dict[int, Callable[[], Awaitable[None]]]):
        self.inner = inner
        self.hooks = hooks
        self.puts = 0
        self.fetched: Fetched = inner.fetched

    async def check(self) -> None:
        await self.inner.check()

    async def put(self, key: str, data: bytes) -> None:
        await self.inner.put(key, data)
        hook = self.hooks.get(self.puts)
        self.puts += 1
        if hook is not None:
            await hook()

    async def put_stream(self, key: str, chunks: AsyncIterable[bytes]) -> None:
        await self.inner.put_stream(key, chunks)

    async def get(self, key: str, start: int = 0, end: int | None = None) -> bytes | None:
        return await self.inner.get(key, start, end)

    async def delete(self, key: str) -> None:
        await self.inner.delete(key)

    async def keys(self, prefix: str) -> list[str]:
        return await self.inner.keys(prefix)


def collector_of(client: Client, clock: Callable[[], int]) -> TierCollector:
    """A cold-tier collector like the app's (same grace period), on a clock of the test's."""
    parts, settings = client.app[PARTS], client.app[SETTINGS]
    return TierCollector(
        parts.catalog,
        parts.writers,
        SlotMap(settings.topic_prefix, settings.write_slots),
        parts.store,
        internal_topic(settings.topic_prefix, InternalTopic.TIER),
        parts.follower.caught_up,
        clock,
        grace_ms=parts.tiering.policy.retention_grace_ms,
        interval_s=3600,
    )


async def _append(client: Client, path: str, count: int, tag: str) -> list[bytes]:
    bodies = [f"{tag}-{n:03d} ".encode() * 30 for n in range(count)]
    for body in bodies:
        posted = await client.post(path, data=body, headers=TEXT)
        assert posted.status == 204, await posted.text()
    return bodies


async def _tiered_client(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, s3: S3Server, unique: str
) -> Client:
    """An adapter tiering a tiny hot window, whose passes and collections the test runs."""
    settings = tier_settings(make_settings, s3, unique, tier_interval_ms=3_600_000)
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    return client


async def test_a_pass_redone_while_the_sweep_runs_never_commits_a_deleted_chunk(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str, s3: S3Server
) -> None:
    """A pass uploads its chunk and fails (it took too long); the sweep first sees that object
    then. Nearly a grace period later the pass is redone, and the sweep lists the store
    between the redo's upload and its commit: the object it deletes must not be the one the
    redo commits (Kafka frees the records once it is committed)."""
    client = await _tiered_client(aiohttp_client, make_settings, s3, unique)
    parts = client.app[PARTS]
    bucket, path = f"redo-{unique}", f"/redo-{unique}/s"
    assert (await client.put(f"/{bucket}")).status == 201
    assert (await client.put(path, headers=TEXT)).status == 201
    written = b"".join(await _append(client, path, 40, "m"))
    clock = Clock()
    worker, sweep = parts.tiering, collector_of(client, clock)
    worker.clock = clock
    grace, within = worker.policy.retention_grace_ms, worker.policy.commit_within_ms
    first_seen = clock.now + within + 1

    async def too_slow() -> None:
        clock.now = first_seen

    async def swept_before_commit() -> None:
        clock.now = first_seen + grace  # the first attempt's object is due now
        await sweep.collect_once()

    worker.store = HookedStore(parts.store, {0: too_slow, 1: swept_before_commit})
    with pytest.raises(LogUnavailable, match="took too long"):
        await worker.tier_once()
    assert await sweep.collect_once() == (0, [])  # first seen at `first_seen`
    clock.now = first_seen + grace - 1000  # the redo starts: its commit is a second later
    assert await worker.tier_once() == 1
    listed = {chunk.object_key for r in manifest(client.app[SETTINGS]) for chunk in r.chunks}
    assert listed
    stored = set(await parts.store.keys(chunks.OBJECT_PREFIX))
    assert listed <= stored, f"listed but deleted: {listed - stored}"
    body, _ = await catch_up(client, path, "-1")
    assert body == written


async def _bootstrap_begun_before_a_newer_snapshot(
    client: Client, unique: str
) -> tuple[Bootstrap, list[bytes]]:
    """A stream with a snapshot, tiered past it; a `/bootstrap` begun (its stream state and
    snapshot taken) and then a newer snapshot published at the tail, retaining past every
    chunk. Returns the bootstrap and the messages it must give after its snapshot."""
    parts = client.app[PARTS]
    bucket, path = f"boot-{unique}", f"/boot-{unique}/s"
    assert (await client.put(f"/{bucket}")).status == 201
    assert (await client.put(path, headers=TEXT)).status == 201
    await _append(client, path, 5, "early")
    first = (await client.head(path)).headers["Stream-Next-Offset"]
    assert (await client.put(f"{path}/snapshot/{first}", data=b"S1", headers=STATE)).status == 204
    later = await _append(client, path, 40, "later")
    while await parts.tiering.tier_once():
        pass
    assert [c for r in manifest(client.app[SETTINGS]) for c in r.chunks]
    boot = await parts.snapshots.bootstrap(StreamRef(bucket, "s"))
    tail = (await client.head(path)).headers["Stream-Next-Offset"]
    assert (await client.put(f"{path}/snapshot/{tail}", data=b"S2", headers=STATE)).status == 204
    return boot, later


async def _rest_of(snapshots: SnapshotService, boot: Bootstrap) -> list[bytes]:
    return [message async for messages in snapshots.updates(boot) for message in messages]


async def test_a_bootstrap_begun_before_a_newer_snapshot_gets_every_message_within_grace(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str, s3: S3Server
) -> None:
    """The collector runs while a `/bootstrap` from the older snapshot is under way: the
    chunks it reads stay for the grace period a newer snapshot's retention waits in Kafka."""
    client = await _tiered_client(aiohttp_client, make_settings, s3, unique)
    boot, later = await _bootstrap_begun_before_a_newer_snapshot(client, unique)
    collector = collector_of(client, Clock())
    await collector.collect_once()
    assert await _rest_of(client.app[PARTS].snapshots, boot) == later


async def test_a_chunk_collected_under_a_reader_is_gone_never_empty(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str, s3: S3Server
) -> None:
    """Past the grace period the collector drops the chunks below the newer snapshot; a
    reader still going from the older one gets 410 (`offset_gone`), never a short answer
    that says it is complete."""
    client = await _tiered_client(aiohttp_client, make_settings, s3, unique)
    boot, _ = await _bootstrap_begun_before_a_newer_snapshot(client, unique)
    clock = Clock()
    clock.now += client.app[PARTS].tiering.policy.retention_grace_ms + 1
    changed, _ = await collector_of(client, clock).collect_once()
    assert changed > 0
    with pytest.raises(ProtocolError) as raised:
        await _rest_of(client.app[PARTS].snapshots, boot)
    assert raised.value.code is ErrorCode.OFFSET_GONE


async def test_a_bucket_created_again_during_a_pass_keeps_its_new_records(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str, s3: S3Server
) -> None:
    """Between a pass's upload and its DeleteRecords the bucket is deleted and created again,
    and its new topic gets more records than the old range held: the pass must not free
    them (the old range's end is an offset of the old topic)."""
    client = await _tiered_client(aiohttp_client, make_settings, s3, unique)
    parts = client.app[PARTS]
    bucket, path = f"again-{unique}", f"/again-{unique}/s"
    topic = bucket_topic(client.app[SETTINGS].topic_prefix, bucket)
    assert (await client.put(f"/{bucket}")).status == 201
    assert (await client.put(path, headers=TEXT)).status == 201
    await _append(client, path, 40, "old")
    renewed: list[bytes] = []

    async def delete_and_create_again() -> None:
        assert (await client.delete(path)).status == 204
        assert (await client.delete(f"/{bucket}")).status == 204
        assert (await client.put(f"/{bucket}")).status == 201
        assert (await client.put(path, headers=TEXT)).status == 201
        renewed.extend(await _append(client, path, 60, "new"))

    parts.tiering.store = HookedStore(parts.store, {0: delete_and_create_again})
    try:
        await parts.tiering.tier_once()
    except TopologyError as error:  # the pass may give up, to be tried again
        print(f"the pass gave up: {error}")
    assert renewed
    low, _ = await asyncio.to_thread(log_start, client.app[SETTINGS].bootstrap_servers, topic)
    body, _ = await catch_up(client, path, "-1")
    assert (low, body) == (0, b"".join(renewed))
    # The next passes tier the new bucket as any other.
    parts.tiering.store = parts.store
    while await parts.tiering.tier_once():
        pass
    assert (await catch_up(client, path, "-1"))[0] == b"".join(renewed)
