"""The cold tier on a real broker and MinIO: streams larger than a tiny hot window are tiered,
Kafka really frees the space (its log start offset moves), and every read mode from -1 gives
the very bytes and offset tokens it gave before, also after a restart."""

from __future__ import annotations

import asyncio
import email
import email.policy
import itertools
import json
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from adapter.app import PARTS, SETTINGS, create_app
from adapter.cli import print_tier_stats
from adapter.config import Settings
from adapter.objects.s3 import S3ObjectStore
from adapter.service.tier_gc import TierCollector
from adapter.tier import chunks
from adapter.tier.manifest import Place, TierRange, decode
from devstack import kafka, minio
from devstack.process import free_port
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready
from tests.kafka_reads import compacted_entries
from tests.services import DISCARD_S, S3Server
from topology.naming import InternalTopic, bucket_topic, internal_topic
from topology.slots import SlotMap

TEXT = "text/plain"
BINARY = "application/octet-stream"
HOT_WINDOW = 4096


def tier_settings(
    make_settings: SettingsFactory, s3: S3Server, unique: str, **more: Any
) -> Settings:
    chosen: dict[str, Any] = {
        "partitions": 1,  # every stream of the bucket shares one partition
        "cold_backend": "s3",
        "s3_bucket": f"tier-{unique}",
        "s3_endpoint_url": s3.endpoint_url,
        "s3_access_key_id": s3.access_key_id,
        "s3_secret_access_key": s3.secret_access_key,
        "tier_after_bytes": HOT_WINDOW,
        "tier_after_ms": 0,
        "tier_interval_ms": 200,
        "hot_cache_bytes": 0,  # every read goes to Kafka or the chunks, never the hot tail
        "read_chunk_bytes": 2048,  # many bounded reads per stream
        "long_poll_timeout_ms": 500,
    }
    return make_settings(**(chosen | more))


@dataclass
class Written:
    """What was written: each stream's bytes, and every offset token a reader was given."""

    bucket: str
    bodies: dict[str, bytes]
    tokens: dict[str, list[str]]


async def write_streams(
    client: Client,
    bucket: str,
    rounds: int,
    seed: int,
    every_tenth: Callable[[], Awaitable[object]] | None = None,
) -> Written:
    """Three interleaved streams (text, text, binary) in one partition, a fork of the first
    from the middle with messages of its own, all closed; `every_tenth` runs every ten
    rounds (a tier pass: several ranges, the fork point inside one)."""
    rng = random.Random(seed)
    assert (await client.put(f"/{bucket}")).status == 201
    kinds = {"alpha": TEXT, "beta": TEXT, "gamma": BINARY}
    for name, kind in kinds.items():
        assert (await client.put(f"/{bucket}/{name}", headers={"Content-Type": kind})).status == 201
    middle = ""
    for round_ in range(rounds):
        for name, kind in kinds.items():
            size = rng.randint(40, 400)
            body = (
                rng.randbytes(size)
                if kind == BINARY
                else "".join(rng.choices("abcdefghij", k=size)).encode()
            )
            posted = await client.post(
                f"/{bucket}/{name}", data=body, headers={"Content-Type": kind}
            )
            assert posted.status == 204
            if name == "alpha" and round_ == rounds // 2:
                middle = posted.headers["Stream-Next-Offset"]
        if every_tenth is not None and round_ % 10 == 9:
            await every_tenth()
    fork = {"Stream-Forked-From": f"/{bucket}/alpha", "Stream-Fork-Offset": middle}
    created = await client.put(f"/{bucket}/fork", headers=fork, skip_auto_headers=("Content-Type",))
    assert created.status == 201
    for body in (b"fork-1", b"fork-2", b"fork-3"):
        assert (
            await client.post(f"/{bucket}/fork", data=body, headers={"Content-Type": TEXT})
        ).status == 204
    for name in (*kinds, "fork"):
        closing = {"Content-Type": TEXT if name != "gamma" else BINARY, "Stream-Closed": "true"}
        assert (await client.post(f"/{bucket}/{name}", headers=closing)).status == 204
    reference = Written(bucket, {}, {})
    for name in (*kinds, "fork"):
        body, tokens = await catch_up(client, f"/{bucket}/{name}", "-1")
        reference.bodies[name], reference.tokens[name] = body, tokens
    return reference


async def catch_up(
    client: Client, path: str, offset: str, live: str = ""
) -> tuple[bytes, list[str]]:
    """Every byte from `offset` to the tail by repeated reads, and each Stream-Next-Offset."""
    body, tokens = b"", []
    params = {"offset": offset} | ({"live": live} if live else {})
    for _ in range(10_000):
        response = await client.get(path, params=params)
        assert response.status == 200, await response.text()
        body += await response.read()
        params["offset"] = response.headers["Stream-Next-Offset"]
        tokens.append(params["offset"])
        if response.headers.get("Stream-Up-To-Date") == "true":
            return body, tokens
    raise AssertionError("the reads never reached the tail")


async def sse_text(client: Client, path: str) -> bytes:
    """The data of every SSE event from -1 of a closed text stream (the server ends it)."""
    response = await client.get(path, params={"offset": "-1", "live": "sse"})
    assert response.status == 200
    text = (await asyncio.wait_for(response.read(), 60)).decode()
    events = [block.split("\n") for block in text.strip().split("\n\n")]
    data = []
    for lines in events:
        if lines[0] == "event: data":
            data.append("\n".join(line.removeprefix("data:") for line in lines[1:]))
    return "".join(data).encode()


async def bootstrap_bodies(client: Client, path: str) -> bytes:
    """The messages of `/bootstrap` (after its empty snapshot part), concatenated."""
    response = await client.get(f"{path}/bootstrap")
    assert response.status == 200
    head = f"Content-Type: {response.headers['Content-Type']}\r\n\r\n".encode()
    message = email.message_from_bytes(head + await response.read(), policy=email.policy.HTTP)
    parts = [part.get_payload(decode=True) for part in message.iter_parts()]
    assert parts[0] == b""  # no snapshot
    assert all(isinstance(part, bytes) for part in parts)
    return b"".join(part for part in parts[1:] if isinstance(part, bytes))


def log_start(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    """Kafka's (log start offset, high watermark) of a partition, as any consumer sees them."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "never-joined"})
    try:
        part = TopicPartition(topic, partition)
        low, high = consumer.get_watermark_offsets(part, 10, cached=False)
        return int(low), int(high)
    finally:
        consumer.close()


def manifest(settings: Settings) -> list[TierRange]:
    """The ranges in the tier topic, one per key (as compaction would leave them)."""
    topic = internal_topic(settings.topic_prefix, InternalTopic.TIER)
    return [decode(k, v) for k, v in compacted_entries(settings.bootstrap_servers, topic) if v]


async def until(check: Callable[[], Awaitable[bool]], what: str, tries: int = 600) -> None:
    for _ in range(tries):
        if await check():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"never: {what}")


async def tiered_past(settings: Settings, bucket: str, offset: int) -> None:
    """Wait until Kafka's log start offset of the bucket's partition is at least `offset`."""
    topic = bucket_topic(settings.topic_prefix, bucket)

    async def moved() -> bool:
        return (await asyncio.to_thread(log_start, settings.bootstrap_servers, topic))[0] >= offset

    await until(moved, f"{topic} freed below {offset}")


async def tier_until_done(client: Client) -> int:
    """Run the tier worker's passes until one tiers nothing; how many ranges were committed."""
    committed = 0
    while done := await client.app[PARTS].tiering.tier_once():
        committed += done
    return committed


async def ready_after_restart(client: Client) -> None:
    """Ready, however long a broker just restarted on a busy machine takes to serve."""
    for _ in range(600):
        if (await client.get("/readyz")).status == 200:
            return
        await asyncio.sleep(0.2)
    raise AssertionError("the adapter never became ready after the restart")


async def assert_every_read_mode(client: Client, written: Written) -> None:
    for name, body in written.bodies.items():
        path = f"/{written.bucket}/{name}"
        assert await catch_up(client, path, "-1") == (body, written.tokens[name]), name
        assert (await catch_up(client, path, "-1", live="long-poll"))[0] == body, name
        assert await bootstrap_bodies(client, path) == body, name
        for token in written.tokens[name][:-1]:  # resuming at any token given before
            rest = await catch_up(client, path, token)
            assert written.bodies[name].endswith(rest[0]), (name, token)
            assert rest[1][-1] == written.tokens[name][-1]
        if name != "gamma":
            assert await sse_text(client, path) == body, name


@pytest.mark.timeout(300)
async def test_old_data_moves_to_chunks_kafka_frees_it_and_every_read_is_identical(
    aiohttp_client: ClientFactory,
    make_settings: SettingsFactory,
    unique: str,
    s3: S3Server,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = tier_settings(make_settings, s3, unique, tier_interval_ms=3_600_000)
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    bucket = f"tier-{unique}"
    written = await write_streams(
        client, bucket, rounds=30, seed=1, every_tenth=lambda: tier_until_done(client)
    )
    topic = bucket_topic(settings.topic_prefix, bucket)
    _, head = log_start(settings.bootstrap_servers, topic)
    total = sum(len(body) for body in written.bodies.values())
    assert total > 5 * HOT_WINDOW

    # Everything but about the hot window leaves Kafka (the test runs the worker's passes).
    await tier_until_done(client)
    assert log_start(settings.bootstrap_servers, topic)[0] > head // 2
    metrics = client.app[PARTS].metrics  # what /metrics shows of it
    hot = next(iter(metrics.tier_hot_bytes.collect())).samples[0].value
    lag = next(iter(metrics.tier_lag_bytes.collect())).samples[0].value
    assert 0 < hot < total  # the hot window stays in Kafka, the rest left
    assert 0 <= lag < HOT_WINDOW  # what is due is less than a range worth cutting
    ranges = manifest(settings)
    assert len(ranges) > 2
    assert all(r.topic == topic for r in ranges)
    ordered = sorted(ranges, key=lambda r: r.start)
    assert all(a.end == b.start for a, b in itertools.pairwise(ordered))  # no hole
    low, _ = log_start(settings.bootstrap_servers, topic)
    print(f"head {head}, log start {low}, ranges {[(r.start, r.end) for r in ordered]}")
    assert ordered[0].start == 0
    assert ordered[-1].end == low  # freed exactly what is tiered
    store = S3ObjectStore(
        settings.s3_bucket,
        5,
        s3.endpoint_url,
        settings.s3_region,
        s3.access_key_id,
        s3.secret_access_key,
    )
    keys = set(await store.keys(chunks.OBJECT_PREFIX))
    assert {c.object_key for r in ranges for c in r.chunks} <= keys
    cold = sum(c.payload_bytes for r in ranges for c in r.chunks)
    assert cold > total // 2

    # The operator's view (`durable-kafka tier-stats`) says the same.
    capsys.readouterr()
    assert await print_tier_stats(settings) == 0
    (stats,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (stats["bucket_id"], stats["partition"], stats["log_start"]) == (bucket, 0, low)
    assert (stats["tiered_to"], stats["cold_bytes"]) == (ordered[-1].end, cold)
    assert stats["ranges"] == len(ranges)
    stored = total - len(written.bodies["fork"]) + len(b"fork-1fork-2fork-3")  # no copy in a fork
    assert stats["hot_bytes"] == stored - cold  # every value below the log start is cold
    assert HOT_WINDOW <= stats["hot_bytes"] < HOT_WINDOW + 1000  # the window and a message

    await assert_every_read_mode(client, written)
    assert client.app[PARTS].streams.reads.cold.cache.size > 0  # the chunks were read

    # A fresh instance knows the tier from the tier topic alone.
    await client.close()
    again = await aiohttp_client(create_app(settings))
    await wait_ready(again)
    assert again.app[PARTS].catalog.tier.tiered_to(Place(topic, ranges[0].bucket_created_at_ms, 0))
    await assert_every_read_mode(again, written)
    assert again.app[PARTS].streams.reads.cold.cache.size > 0


async def _append(client: Client, path: str, bodies: list[bytes]) -> None:
    for body in bodies:
        posted = await client.post(path, data=body, headers={"Content-Type": TEXT})
        assert posted.status == 204, await posted.text()


async def _tier_check(client: Client) -> dict[str, Any]:
    report = await (await client.get("/readyz")).json()
    check: dict[str, Any] = report["checks"]["tier"]
    return check


def _contiguous(ranges: list[TierRange]) -> list[tuple[int, int]]:
    spans = sorted((r.start, r.end) for r in ranges)
    assert spans[0][0] == 0
    assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))  # no hole, no overlap
    return spans


@pytest.mark.timeout(300)  # its own broker and MinIO, each started twice
async def test_store_down_mid_tiering_then_broker_restart(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str, tmp_path: Path
) -> None:
    """MinIO stops while tiering runs: writes and hot reads go on, cold reads answer 503 with
    Retry-After, Kafka keeps everything; MinIO back, tiering completes with no hole and no
    duplicate range; after a broker and adapter restart every byte reads back the same."""
    node = minio.MinioNode(home=tmp_path / "minio", port=free_port(), console_port=free_port())
    broker = kafka.KafkaNode(home=tmp_path / "kafka", port=free_port(), controller_port=free_port())
    store = S3Server(minio.start(node), minio.ACCESS_KEY, minio.SECRET_KEY)
    settings = tier_settings(
        make_settings,
        store,
        unique,
        bootstrap_servers=kafka.start(broker),
        tier_cache_bytes=0,  # every cold read goes to the store
    )
    try:
        await _store_down_mid_tiering(aiohttp_client, settings, unique, node, broker)
    finally:
        minio.stop(node, DISCARD_S)
        kafka.stop(broker, DISCARD_S)


async def _store_down_mid_tiering(
    aiohttp_client: ClientFactory,
    settings: Settings,
    unique: str,
    node: minio.MinioNode,
    broker: kafka.KafkaNode,
) -> None:
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    rng = random.Random(2)
    bucket, path = f"fault-{unique}", f"/fault-{unique}/s"
    topic = bucket_topic(settings.topic_prefix, bucket)
    assert (await client.put(f"/{bucket}")).status == 201
    assert (await client.put(path, headers={"Content-Type": TEXT})).status == 201
    written = [rng.randbytes(150).hex().encode() for _ in range(120)]
    await _append(client, path, written[:60])
    await tiered_past(settings, bucket, 20)

    await asyncio.to_thread(minio.stop, node)
    await _append(client, path, written[60:])  # writes are unaffected
    hot_token = (await client.head(path)).headers["Stream-Next-Offset"]
    await _append(client, path, [b"hot"])
    hot = await client.get(path, params={"offset": hot_token})
    assert (hot.status, await hot.read()) == (200, b"hot")

    async def failing() -> bool:
        return bool((await _tier_check(client))["last_error"])

    await until(failing, "a failed tier pass reported in /readyz")
    before = _contiguous(manifest(settings))
    low, _ = log_start(settings.bootstrap_servers, topic)
    assert low == before[-1][1]  # Kafka keeps everything not tiered
    cold = await client.get(path, params={"offset": "-1"})
    assert cold.status == 503
    assert cold.headers["Retry-After"]
    assert (await cold.json())["error"]["code"] == "unavailable"

    await asyncio.to_thread(minio.start, node)
    _, head = log_start(settings.bootstrap_servers, topic)
    await tiered_past(settings, bucket, head - 60)  # 30 appends: twice the hot window
    spans = _contiguous(manifest(settings))
    assert len(spans) > len(before)
    everything = b"".join(written) + b"hot"
    assert (await catch_up(client, path, "-1"))[0] == everything

    await client.close()
    await asyncio.to_thread(kafka.stop, broker)
    await asyncio.to_thread(kafka.start, broker)
    again = await aiohttp_client(create_app(settings))
    await ready_after_restart(again)
    assert (await catch_up(again, path, "-1"))[0] == everything
    assert (await catch_up(again, path, "-1", live="long-poll"))[0] == everything
    assert _contiguous(manifest(settings)) == spans


async def test_chunks_no_stream_can_read_are_collected(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str, s3: S3Server
) -> None:
    """A deleted stream's chunks, a snapshot's retained-away chunks and, once the bucket is
    gone, all its ranges leave the manifest and the store; what streams still read stays."""
    settings = tier_settings(make_settings, s3, unique, tier_interval_ms=3_600_000)
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    bucket = f"gc-{unique}"
    topic = bucket_topic(settings.topic_prefix, bucket)
    assert (await client.put(f"/{bucket}")).status == 201
    names = ("keep", "drop", "trim")
    for name in names:
        assert (await client.put(f"/{bucket}/{name}", headers={"Content-Type": TEXT})).status == 201
    tails: list[str] = []
    for round_ in range(20):
        for name in names:
            await _append(client, f"/{bucket}/{name}", [f"{name}-{round_:02d} ".encode() * 40])
        tails.append((await client.head(f"/{bucket}/trim")).headers["Stream-Next-Offset"])
    references = {name: await catch_up(client, f"/{bucket}/{name}", "-1") for name in names}
    trimmed = await catch_up(client, f"/{bucket}/trim", tails[9])
    _, head = log_start(settings.bootstrap_servers, topic)
    assert await tier_until_done(client) > 0
    assert log_start(settings.bootstrap_servers, topic)[0] > head // 2
    parts = client.app[PARTS]
    collector = TierCollector(
        parts.catalog,
        parts.writers,
        SlotMap(settings.topic_prefix, settings.write_slots),
        parts.store,
        internal_topic(settings.topic_prefix, InternalTopic.TIER),
        parts.follower.caught_up,
        lambda: int(time.time() * 1000),
        grace_ms=0,  # orphans go in the pass that finds them, and snapshots are settled at once
        interval_s=3600,
    )
    assert await collector.collect_once() == (0, [])  # every chunk is read by some stream
    listed = {c.object_key: c for r in manifest(settings) for c in r.chunks}
    retained = int(tails[9].replace("_", ""))

    assert (await client.delete(f"/{bucket}/drop")).status == 204
    snapshot = {"Content-Type": "application/octet-stream"}
    published = await client.put(f"/{bucket}/trim/snapshot/{tails[9]}", data=b"S", headers=snapshot)
    assert published.status == 204
    changed, deleted = await collector.collect_once()
    assert changed > 0
    gone = {
        key
        for key, c in listed.items()
        if c.stream_id == "drop" or (c.stream_id == "trim" and c.last_offset < retained)
    }
    assert gone
    assert set(deleted) == gone
    left = {c.object_key for r in manifest(settings) for c in r.stored}
    assert left == set(listed) - gone
    collected = {
        (c.stream_id, c.first_offset) for r in manifest(settings) for c in r.chunks if c.collected
    }
    # Still named, without their objects: a reader at them gets 410.
    assert collected == {(listed[key].stream_id, listed[key].first_offset) for key in gone}
    assert set(await parts.store.keys(chunks.OBJECT_PREFIX)) == left
    assert await catch_up(client, f"/{bucket}/keep", "-1") == references["keep"]
    assert await catch_up(client, f"/{bucket}/trim", tails[9]) == trimmed
    assert (await client.get(f"/{bucket}/trim", params={"offset": "-1"})).status == 410

    for name in ("keep", "trim"):
        assert (await client.delete(f"/{bucket}/{name}")).status == 204
    assert (await client.delete(f"/{bucket}")).status == 204
    changed, deleted = await collector.collect_once()
    assert set(deleted) == left
    assert [r for r in manifest(settings) if r.topic == topic] == []
    assert await parts.store.keys(chunks.OBJECT_PREFIX) == []


async def test_a_fork_of_another_bucket_is_tiered_with_its_source_and_keeps_its_chunks(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str, s3: S3Server
) -> None:
    """The fork's records are in its source's bucket's topic: they are tiered with the
    source's under the fork's own key, reads give the same bytes from chunks, and the
    collector keeps every chunk the fork reads, its soft-deleted source's included."""
    settings = tier_settings(make_settings, s3, unique, tier_interval_ms=3_600_000)
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    source_bucket, fork_bucket = f"xs-{unique}", f"xf-{unique}"
    for bucket in (source_bucket, fork_bucket):
        assert (await client.put(f"/{bucket}")).status == 201
    source, fork = f"/{source_bucket}/src", f"/{fork_bucket}/fork"
    assert (await client.put(source, headers={"Content-Type": TEXT})).status == 201
    await _append(client, source, [f"src-{n:02d} ".encode() * 40 for n in range(10)])
    forked = {"Content-Type": TEXT, "Stream-Forked-From": source}
    assert (await client.put(fork, headers=forked)).status == 201
    for n in range(10):
        await _append(client, fork, [f"own-{n:02d} ".encode() * 40])
        await _append(client, source, [f"later-{n:02d} ".encode() * 40])
    before = await catch_up(client, fork, "-1")
    topic = bucket_topic(settings.topic_prefix, source_bucket)
    _, head = log_start(settings.bootstrap_servers, topic)
    assert await tier_until_done(client) > 0
    assert log_start(settings.bootstrap_servers, topic)[0] > head // 2
    chunks_of = {
        c.object_key: c.stream_id for r in manifest(settings) if r.topic == topic for c in r.chunks
    }
    assert set(chunks_of.values()) == {"src", f"{fork_bucket}//fork"}
    assert await catch_up(client, fork, "-1") == before
    parts = client.app[PARTS]
    collector = TierCollector(
        parts.catalog,
        parts.writers,
        SlotMap(settings.topic_prefix, settings.write_slots),
        parts.store,
        internal_topic(settings.topic_prefix, InternalTopic.TIER),
        parts.follower.caught_up,
        lambda: int(time.time() * 1000),
        grace_ms=0,
        interval_s=3600,
    )
    assert await collector.collect_once() == (0, [])
    assert (await client.delete(source)).status == 204  # soft: the fork reads its records
    _, deleted = await collector.collect_once()
    assert {chunks_of[key] for key in deleted} <= {"src"}  # at most the source's later ones
    kept = {c.stream_id for r in manifest(settings) if r.topic == topic for c in r.stored}
    assert kept == {"src", f"{fork_bucket}//fork"}  # the source's range below the fork point
    assert await catch_up(client, fork, "-1") == before


@pytest.mark.timeout(180)
async def test_a_large_chunk_goes_up_in_parts_and_a_read_from_its_middle_fetches_little(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str, s3: S3Server
) -> None:
    """A chunk over 10 MiB is a multipart upload (its ETag says how many parts); a fresh reader
    starting in its middle fetches the header and the blocks it reads, by ranged GETs that the
    store counts, and the bytes are those Kafka gave before tiering."""
    settings = tier_settings(
        make_settings, s3, unique, tier_interval_ms=3_600_000, read_chunk_bytes=64 * 1024
    )
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    bucket, path = f"big-{unique}", f"/big-{unique}/s"
    assert (await client.put(f"/{bucket}")).status == 201
    assert (await client.put(path, headers={"Content-Type": BINARY})).status == 201
    rng = random.Random(3)  # incompressible: the chunk is as large as the payload
    for _ in range(44):  # 11 MiB
        posted = await client.post(
            path, data=rng.randbytes(256 * 1024), headers={"Content-Type": BINARY}
        )
        assert posted.status == 204
    body, tokens = await catch_up(client, path, "-1")  # from Kafka: one message per read
    assert await tier_until_done(client) == 1
    (tiered,) = manifest(settings)
    (chunk,) = tiered.chunks
    assert chunk.object_bytes > 10 * 2**20  # all but the last message (the hot window)
    store = client.app[PARTS].store
    assert isinstance(store, S3ObjectStore)
    head = await asyncio.to_thread(
        store._client.head_object, Bucket=settings.s3_bucket, Key=chunk.object_key
    )
    assert head["ETag"].strip('"').endswith("-2")  # two parts of 8 MiB at most

    fetched = store.fetched
    assert fetched.gets == 0  # nothing read from the chunks yet
    assert len(tokens) == 44  # one message per read
    middle, size = tokens[21], 256 * 1024  # after 22 messages
    response = await client.get(path, params={"offset": middle})
    assert response.status == 200
    assert await response.read() == body[22 * size : 23 * size]
    assert 2 <= fetched.gets == fetched.ranged_gets
    assert fetched.size < chunk.object_bytes // 8
    # The same tokens too: one ends where the chunk's last message does (a read that is full
    # there still finds the next message's offset, past the commit marker, as Kafka's did).
    assert await catch_up(client, path, middle) == (body[22 * size :], tokens[22:])
    assert fetched.size < chunk.object_bytes * 0.6  # each block once, none below the middle


async def test_the_consoles_seek_to_the_last_messages_reaches_into_the_cold_tier(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str, s3: S3Server
) -> None:
    """`/ui/api/seek?last=N` counts back from the tail across what Kafka freed: the last N
    messages, some of them only in chunks, start at the offset it answers."""
    bodies = [f"<{n:03d}>".encode() + b"x" * 200 for n in range(60)]  # 12 KB: 3 hot windows
    client, bucket, path = await _freed_stream(
        await aiohttp_client(
            create_app(tier_settings(make_settings, s3, unique, tier_interval_ms=3_600_000))
        ),
        f"seek-{unique}",
        bodies,
    )
    for last in (3, 40, 60, 1000):
        sought = await client.get(f"/ui/api/seek/{bucket}/numbers", params={"last": str(last)})
        assert sought.status == 200, (last, await sought.text())
        body, _ = await catch_up(client, path, (await sought.json())["offset"])
        assert body == b"".join(bodies[-last:]), last


async def test_the_consoles_records_list_what_kafka_freed_from_the_cold_tier(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str, s3: S3Server
) -> None:
    """`/ui/api/records` from -1 of a stream Kafka freed the start of: every message listed
    once, in order, with its offset, time and size, the tiered ones read from their chunks."""
    bodies = [f"<{n:03d}>".encode() + b"x" * (200 + n) for n in range(60)]
    client, bucket, path = await _freed_stream(
        await aiohttp_client(
            create_app(tier_settings(make_settings, s3, unique, tier_interval_ms=3_600_000))
        ),
        f"rec-{unique}",
        bodies,
    )
    listed: list[dict[str, object]] = []
    offset = "-1"
    while len(listed) < 70:
        answer = await client.get(
            f"/ui/api/records/{bucket}/numbers", params={"offset": offset, "limit": "25"}
        )
        assert answer.status == 200, await answer.text()
        records = (await answer.json())["records"]
        if not records:
            break
        listed += records
        offset = str(records[-1]["next_offset"])
    assert [record["bytes"] for record in listed] == [len(body) for body in bodies]
    kafka_offsets = [int(str(record["kafka_offset"])) for record in listed]
    assert kafka_offsets == sorted(set(kafka_offsets))
    assert all(int(str(record["timestamp_ms"])) > 0 for record in listed)
    for record, body in zip(listed[::7], bodies[::7], strict=False):  # the offsets read them
        read = await client.get(path, params={"offset": str(record["offset"])})
        assert (await read.read()).startswith(body)


async def _freed_stream(
    client: Client, bucket: str, bodies: list[bytes]
) -> tuple[Client, str, str]:
    """A text stream `numbers` of `bodies` in a new bucket, tiered, and freed by Kafka below:
    the client, the bucket and the stream's path."""
    await wait_ready(client)
    path = f"/{bucket}/numbers"
    assert (await client.put(f"/{bucket}")).status == 201
    assert (await client.put(path, headers={"Content-Type": TEXT})).status == 201
    await _append(client, path, bodies)
    await tier_until_done(client)
    settings = client.app[SETTINGS]
    topic = bucket_topic(settings.topic_prefix, bucket)
    assert log_start(settings.bootstrap_servers, topic)[0] > 0  # Kafka freed the oldest
    return client, bucket, path
