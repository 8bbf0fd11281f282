"""Retention frees Kafka: once snapshots moved every stream of a partition past a point (and
the grace period passed), the tier worker drops the records below it, so the partition's log
start offset moves; a stream without a snapshot, or a fork reading its source's older range,
holds it back. Reads below answer 410 and `/bootstrap` still rebuilds the state."""

from __future__ import annotations

import asyncio
import email
import email.policy
import time
from dataclasses import replace

from confluent_kafka import Consumer, TopicPartition

from adapter.app import PARTS, create_app
from adapter.config import Settings
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready
from tests.kafka_reads import committed_values
from topology.naming import bucket_topic
from topology.wire import decode_token

TEXT = {"Content-Type": "text/plain"}
STATE = {"Content-Type": "application/x-state"}


def _low_watermark(settings: Settings, bucket: str) -> int:
    """Kafka's log start offset of the bucket's only partition, as any consumer sees it."""
    topic = bucket_topic(settings.topic_prefix, bucket)
    consumer = Consumer({"bootstrap.servers": settings.bootstrap_servers, "group.id": "none"})
    try:
        low, _ = consumer.get_watermark_offsets(TopicPartition(topic, 0), 10, cached=False)
        return int(low)
    finally:
        consumer.close()


async def _pass(client: Client, settings: Settings, bucket: str, after_grace: bool) -> int:
    """One tier pass (its clock past the grace period, or not); the log start after it."""
    worker = client.app[PARTS].tiering
    ahead = settings.snapshot_gc_grace_ms + 1 if after_grace else 0
    worker.clock = lambda: int(time.time() * 1000) + ahead
    await worker.tier_once()
    return await asyncio.to_thread(_low_watermark, settings, bucket)


async def _append(client: Client, path: str, body: bytes) -> str:
    response = await client.post(path, data=body, headers=TEXT)
    assert response.status == 204
    return response.headers["Stream-Next-Offset"]


async def _bootstrap(client: Client, path: str) -> list[bytes]:
    """The parts of the stream's `/bootstrap`, the snapshot first."""
    response = await client.get(f"{path}/bootstrap")
    assert response.status == 200
    head = f"Content-Type: {response.headers['Content-Type']}\r\n\r\n".encode()
    message = email.message_from_bytes(head + await response.read(), policy=email.policy.HTTP)
    parts = [part.get_payload(decode=True) for part in message.iter_parts()]
    return [part for part in parts if isinstance(part, bytes)]


async def test_snapshots_free_kafka_below_what_every_stream_of_the_partition_needs(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str
) -> None:
    # One partition, a hot window no test reaches, no background passes: only retention frees.
    settings = make_settings(partitions=1, tier_interval_ms=600_000)
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    bucket = f"rt-{unique}"
    a, b = f"/{bucket}/a", f"/{bucket}/b"
    assert (await client.put(f"/{bucket}")).status == 201
    assert (await client.put(a, headers=TEXT)).status == 201
    created_b = await client.put(b, headers=TEXT)
    assert created_b.status == 201
    b_start = decode_token(created_b.headers["Stream-Next-Offset"]) - 1  # its create record
    for body in (b"a1", b"a2"):
        await _append(client, a, body)
    a_mid = await _append(client, a, b"a3")
    b_tail = await _append(client, b, b"b1")
    for body in (b"a4", b"a5"):
        await _append(client, a, body)
    assert (await client.put(f"{a}/snapshot/{a_mid}", data=b"A123", headers=STATE)).status == 204

    # Within the grace period nothing is freed; past it, `b` (no snapshot) holds it back.
    assert await _pass(client, settings, bucket, after_grace=False) == 0
    assert await _pass(client, settings, bucket, after_grace=True) == b_start

    assert (await client.put(f"{b}/snapshot/{b_tail}", data=b"B1", headers=STATE)).status == 204
    freed = await _pass(client, settings, bucket, after_grace=True)
    assert freed == decode_token(a_mid)  # the least of what `a` and `b` still need
    assert await _pass(client, settings, bucket, after_grace=True) == freed  # nothing more

    for path, earliest in ((a, a_mid), (b, b_tail)):
        gone = await client.get(path, params={"offset": "-1"})
        assert gone.status == 410
        assert gone.headers["Stream-Earliest-Offset"] == earliest
    kept = await client.get(a, params={"offset": a_mid})
    assert (kept.status, await kept.read()) == (200, b"a4a5")
    assert await _bootstrap(client, a) == [b"A123", b"a4", b"a5"]
    assert await _bootstrap(client, b) == [b"B1"]

    # A fork from the retained range inherits the retention and the snapshot; below it, 410.
    below = {"Stream-Forked-From": a, "Stream-Fork-Offset": "-1"}
    refused = await client.put(f"/{bucket}/f0", headers=below | TEXT)
    assert refused.status == 410
    fork = await client.put(f"/{bucket}/f1", headers={"Stream-Forked-From": a} | TEXT)
    assert fork.status == 201
    assert await _bootstrap(client, f"/{bucket}/f1") == [b"A123", b"a4", b"a5"]
    assert (await client.get(f"/{bucket}/f1", params={"offset": "-1"})).status == 410
    # Nothing of what the fork needs was freed: its history starts at `a`'s retention.
    assert await _pass(client, settings, bucket, after_grace=True) == freed


async def test_a_fork_reading_its_sources_older_range_holds_deletion_back(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str
) -> None:
    settings = make_settings(partitions=1, tier_interval_ms=600_000)
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    bucket = f"rf-{unique}"
    a = f"/{bucket}/a"
    assert (await client.put(f"/{bucket}")).status == 201
    created = await client.put(a, headers=TEXT)
    a_start = decode_token(created.headers["Stream-Next-Offset"]) - 1
    first = await _append(client, a, b"a1")
    fork = {"Stream-Forked-From": a, "Stream-Fork-Offset": first}
    assert (await client.put(f"/{bucket}/f", headers=fork | TEXT)).status == 201
    tail = await _append(client, a, b"a2")
    assert (await client.put(f"{a}/snapshot/{tail}", data=b"A", headers=STATE)).status == 204
    # The fork (made before the snapshot) still reads `a1`: nothing below it goes.
    assert await _pass(client, settings, bucket, after_grace=True) == a_start
    kept = await client.get(f"/{bucket}/f", params={"offset": "-1"})
    assert (kept.status, await kept.read()) == (200, b"a1")
    assert (await client.delete(f"/{bucket}/f")).status == 204
    assert await _pass(client, settings, bucket, after_grace=True) == decode_token(tail)
    assert await _bootstrap(client, a) == [b"A"]


async def _fork(client: Client, path: str, source: str) -> None:
    created = await client.put(path, headers=TEXT | {"Stream-Forked-From": source})
    assert created.status == 201, await created.text()


async def _read_all(client: Client, path: str) -> bytes:
    response = await client.get(path, params={"offset": "-1"})
    assert response.status == 200, await response.text()
    return await response.read()


async def test_a_fork_of_another_bucket_frees_nothing_of_its_own_buckets_topic(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str
) -> None:
    """The fork's offsets are its source's topic's: the bucket it belongs to, housing nothing
    else, has no floor from it, and a stream made there later keeps every message."""
    settings = make_settings(partitions=1, tier_interval_ms=600_000)
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    source_bucket, fork_bucket = f"rs-{unique}", f"rd-{unique}"
    for bucket in (source_bucket, fork_bucket):
        assert (await client.put(f"/{bucket}")).status == 201
    pad, source = f"/{source_bucket}/pad", f"/{source_bucket}/s"
    assert (await client.put(pad, headers=TEXT)).status == 201
    for n in range(10):
        await _append(client, pad, f"p{n}".encode())
    assert (await client.put(source, headers=TEXT)).status == 201
    for body in (b"s1", b"s2", b"s3"):
        await _append(client, source, body)
    await _fork(client, f"/{fork_bucket}/f", source)
    assert await _pass(client, settings, fork_bucket, after_grace=True) == 0

    later = f"/{fork_bucket}/g"
    assert (await client.put(later, headers=TEXT)).status == 201
    written = [f"g{n}".encode() for n in range(1, 13)]
    for body in written:
        await _append(client, later, body)
    assert await _pass(client, settings, fork_bucket, after_grace=True) == 0
    assert await _read_all(client, later) == b"".join(written)
    assert await _read_all(client, f"/{fork_bucket}/f") == b"s1s2s3"
    # As any consumer reads the topic, and as an instance that never saw the writes does.
    topic = bucket_topic(settings.topic_prefix, fork_bucket)
    values = await asyncio.to_thread(committed_values, settings.bootstrap_servers, topic)
    assert [v for v in values if v.startswith(b"g")] == written
    await client.close()
    fresh = await aiohttp_client(
        create_app(replace(settings, catalog_dir=f"{settings.catalog_dir}-fresh"))
    )
    await wait_ready(fresh)
    assert await _read_all(fresh, later) == b"".join(written)
    assert await _read_all(fresh, f"/{fork_bucket}/f") == b"s1s2s3"


async def test_forks_of_other_buckets_hold_their_sources_topic_back(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str
) -> None:
    """A fork across buckets, and a fork of it in a third bucket, live in the first source's
    topic: once nothing else needs its records, that topic is freed up to what they read
    and no further."""
    settings = make_settings(partitions=1, tier_interval_ms=600_000)
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    source_bucket, fork_bucket, third = f"hs-{unique}", f"hf-{unique}", f"ht-{unique}"
    for bucket in (source_bucket, fork_bucket, third):
        assert (await client.put(f"/{bucket}")).status == 201
    pad, source = f"/{source_bucket}/pad", f"/{source_bucket}/s"
    assert (await client.put(pad, headers=TEXT)).status == 201
    for n in range(5):
        await _append(client, pad, f"p{n}".encode())
    created = await client.put(source, headers=TEXT)
    source_start = decode_token(created.headers["Stream-Next-Offset"]) - 1  # its create record
    for body in (b"s1", b"s2"):
        await _append(client, source, body)
    fork, fork_of_fork = f"/{fork_bucket}/f", f"/{third}/h"
    await _fork(client, fork, source)
    await _append(client, fork, b"f1")
    await _fork(client, fork_of_fork, fork)
    await _append(client, fork_of_fork, b"h1")
    tail = await _append(client, source, b"s3")
    assert (await client.delete(pad)).status == 204
    trimmed = await client.post(f"{source}/trim", json={"before": tail})
    assert trimmed.status == 204, await trimmed.text()

    assert await _pass(client, settings, source_bucket, after_grace=True) == source_start
    assert await _read_all(client, fork) == b"s1s2f1"
    assert await _read_all(client, fork_of_fork) == b"s1s2f1h1"
    for bucket in (fork_bucket, third):
        assert await _pass(client, settings, bucket, after_grace=True) == 0
