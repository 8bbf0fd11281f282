"""Mounted topics over HTTP on a real broker: a topic written by a plain confluent-kafka
producer (3 partitions, lz4, an aborted transaction, a tombstone, a null key) is mounted and
read per key, byte for byte, in every read mode; unmounting leaves the topic as it was."""

from __future__ import annotations

import asyncio
import base64
import json
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientResponse
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from adapter.app import create_app
from adapter.config import Settings
from adapter.http import buckets as bucket_routes
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready
from tests.kafka_reads import topic_configs

JSON = {"Content-Type": "application/json"}
KEYS = [f"k-{i:03d}" for i in range(120)] + ["a/b", "~tilde", "streams", "\u00e9t\u00e9"]
BINARY_KEY = b"\xff\x00bin"


@pytest.fixture
def make_settings(make_settings: SettingsFactory, unique: str) -> SettingsFactory:
    """The suite's settings, with this test's topics allowed to be mounted over HTTP."""

    def make(**overrides: Any) -> Settings:
        return make_settings(**{"mount_topics": f"*-{unique}"} | overrides)

    return make


def _create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
    futures[topic].result(30)


def _fill(bootstrap: str, topic: str) -> dict[bytes, list[bytes]]:
    """Records as a plain producer writes them; each key's committed values, in order."""
    rng = random.Random(17)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "compression.type": "lz4", "enable.idempotence": True}
    )
    expected: dict[bytes, list[bytes]] = defaultdict(list)
    keys = [key.encode() for key in KEYS] + [BINARY_KEY]
    for n in range(3000):
        key = rng.choice(keys)
        value = f"{key!r}#{n}:".encode() + rng.randbytes(rng.randrange(0, 40))
        producer.produce(topic, value, key)
        expected[key].append(value)
    producer.produce(topic, None, b"k-000")  # a tombstone: skipped
    producer.produce(topic, b"nobody's", None)  # a null key: not addressable
    producer.produce(topic, b"", b"k-001")  # an empty value is a message
    expected[b"k-001"].append(b"")
    assert producer.flush(30) == 0
    aborted = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"tx-{topic}", "linger.ms": 0}
    )
    aborted.init_transactions(30)
    aborted.begin_transaction()
    aborted.produce(topic, b"never served", b"k-002")
    aborted.produce(topic, b"never served either", b"only-aborted")
    aborted.flush(30)
    aborted.abort_transaction(30)
    return expected


def _state(bootstrap: str, topic: str) -> tuple[list[tuple[int, int]], dict[str, str]]:
    """The topic's watermarks per partition and its configuration."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "never-joined"})
    try:
        marks = [consumer.get_watermark_offsets(TopicPartition(topic, p), 10) for p in range(3)]
    finally:
        consumer.close()
    return [(low, high) for low, high in marks], topic_configs(bootstrap, topic)


def _stream_id(key: bytes) -> str:
    text = key.decode("utf-8", "replace")
    if key == BINARY_KEY or text in ("a/b", "~tilde", "streams"):
        return "~" + base64.urlsafe_b64encode(key).decode().rstrip("=")
    return text


async def _body(response: ClientResponse, status: int) -> Any:
    assert response.status == status, await response.text()
    return await response.json()


async def _mount(client: Client, bucket: str, mount: dict[str, Any], status: int) -> Any:
    response = await client.put(f"/{bucket}", data=json.dumps({"mount": mount}), headers=JSON)
    return await _body(response, status)


async def _indexed(client: Client, bucket: str) -> dict[str, Any]:
    for _ in range(600):
        body: dict[str, Any] = await _body(await client.get(f"/{bucket}"), 200)
        if body.get("index", {}).get("caught_up"):
            return body
        await asyncio.sleep(0.05)
    raise AssertionError(f"mount {bucket} never caught up")


async def _catch_up(client: Client, path: str) -> tuple[bytes, str]:
    """Every byte from the start, following Stream-Next-Offset; and the tail token."""
    data, offset = b"", "-1"
    for _ in range(10_000):
        response = await client.get(path, params={"offset": offset})
        assert response.status == 200, await response.text()
        data += await response.read()
        assert response.headers["Stream-Next-Offset"] > offset or offset == "-1"
        offset = response.headers["Stream-Next-Offset"]
        if response.headers.get("Stream-Up-To-Date") == "true":
            return data, offset
    raise AssertionError("catch-up never reached the tail")


async def test_a_mounted_topic_is_read_per_key_in_every_mode(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str
) -> None:
    settings = make_settings(read_chunk_bytes=400)  # many chunks per key: paging is exercised
    bootstrap = settings.bootstrap_servers
    topic = f"orders-{unique}"
    _create_topic(bootstrap, topic)
    expected = await asyncio.to_thread(_fill, bootstrap, topic)
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    bucket = f"mnt-{unique}"

    mounted = await _mount(client, bucket, {"topic": topic}, 201)
    assert (mounted["topic"], mounted["mounted"]) == (topic, True)
    body = await _indexed(client, bucket)
    assert body["streams"] == len(expected)
    assert (body["index"]["tombstones"], body["index"]["null_keys"]) == (1, 1)
    assert body["index"]["records"] == sum(len(values) for values in expected.values())

    for key, values in expected.items():
        path = f"/{bucket}/{_stream_id(key)}"
        data, tail = await _catch_up(client, path)
        assert data == b"".join(values), key
        head = await client.head(path)
        assert (head.status, head.headers["Stream-Next-Offset"]) == (200, tail)
    assert (await client.get(f"/{bucket}/only-aborted")).status == 404

    listed: list[str] = []
    after: str | None = None
    while True:
        params = {"prefix": "k-", "limit": "50"} | ({"after": after} if after else {})
        page = await _body(await client.get(f"/{bucket}/streams", params=params), 200)
        listed += [stream["stream_id"] for stream in page["streams"]]
        after = page["next_cursor"]
        if after is None:
            break
    assert listed == sorted(key for key in KEYS if key.startswith("k-"))

    # Long-poll at the tail, then a record from the plain producer wakes it.
    key, path = b"k-007", f"/{bucket}/k-007"
    _, tail = await _catch_up(client, path)
    poll = asyncio.create_task(client.get(path, params={"offset": tail, "live": "long-poll"}))
    await asyncio.sleep(0.5)
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4"})
    producer.produce(topic, b"live one", key)
    assert producer.flush(30) == 0
    woken = await asyncio.wait_for(poll, 30)
    assert (woken.status, await woken.read()) == (200, b"live one")
    expected[key].append(b"live one")

    # SSE from the start: every value, then a live one from the plain producer.
    sse = await client.get(path, params={"offset": "-1", "live": "sse"})
    assert sse.headers["Stream-SSE-Data-Encoding"] == "base64"
    received = b""
    produced = False
    async with asyncio.timeout(30):
        while received != b"".join([*expected[key], b"live two"]):
            line = (await sse.content.readline()).decode().rstrip("\n")
            if line.startswith("data:") and not line.startswith("data:{"):
                received += base64.b64decode(line.removeprefix("data:"))
            if received == b"".join(expected[key]) and not produced:
                producer.produce(topic, b"live two", key)
                assert producer.flush(30) == 0
                produced = True
    sse.close()

    # Read-only: a precise 405 names the mount; a second mount of the name is 409.
    refused = await _body(await client.post(path, data=b"x"), 405)
    assert refused["error"]["code"] == "mount_read_only"
    assert topic in refused["error"]["message"]
    assert (await client.put(f"/{bucket}/new")).status == 405
    assert (await client.delete(path)).status == 405
    assert (await _mount(client, bucket, {"topic": topic}, 409))["error"]["code"] == "bucket_exists"
    assert (await _body(await client.put(f"/{bucket}"), 409))["error"]["code"] == "bucket_exists"

    # The registry is in Kafka: a restarted instance serves the same mount, and unmounts it.
    await client.close()
    restarted = await aiohttp_client(create_app(settings))
    await wait_ready(restarted)
    await _indexed(restarted, bucket)
    assert (await _catch_up(restarted, path))[0] == b"".join([*expected[key], b"live two"])
    before = await asyncio.to_thread(_state, bootstrap, topic)
    assert (await restarted.delete(f"/{bucket}")).status == 204
    assert (await restarted.get(f"/{bucket}")).status == 404
    assert await asyncio.to_thread(_state, bootstrap, topic) == before  # offsets and config


async def test_mount_requests_are_validated(client: Client, unique: str) -> None:
    async def code(mount: Any, status: int) -> str:
        response = await client.put(
            f"/bad-{unique}", data=json.dumps({"mount": mount}), headers=JSON
        )
        return str((await _body(response, status))["error"]["code"])

    assert await code({"topic": f"missing-{unique}"}, 404) == "topic_not_found"
    assert await code({}, 400) == "invalid_mount"
    assert await code({"topic": "x", "key_encoding": "latin1"}, 400) == "invalid_mount"
    assert await code({"topic": "x", "content_type": "nonsense"}, 400) == "invalid_mount"
    assert await code({"topic": "x", "surprise": 1}, 400) == "invalid_mount"
    assert await code({"topic": "x", "appends": "yes"}, 400) == "invalid_mount"
    assert await code("topic", 400) == "invalid_mount"
    response = await client.put(f"/bad-{unique}", data=b"{not json", headers=JSON)
    assert (await _body(response, 400))["error"]["code"] == "invalid_json"
    assert (await client.get(f"/bad-{unique}")).status == 404  # nothing was registered


def _fill_few(bootstrap: str, topic: str) -> list[bytes]:
    """Five values for the key `key-1` and one for `key-2`; those of `key-1`, in order."""
    _create_topic(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap})
    values = [f"v{n};".encode() for n in range(5)]
    for value in values:
        producer.produce(topic, value, b"key-1")
    producer.produce(topic, b"other", b"key-2")
    assert producer.flush(30) == 0
    return values


async def test_a_mount_serves_reads_as_soon_as_its_put_answers(
    client: Client, kafka_bootstrap: str, unique: str
) -> None:
    """The PUT answers 201 once the mount serves reads: a read right after it is 200 with
    the topic's records (never 503 `not_ready`), and the listing has every key."""
    topic, bucket = f"fresh-{unique}", f"fresh-{unique}"
    values = await asyncio.to_thread(_fill_few, kafka_bootstrap, topic)
    mount = {"topic": topic, "content_type": "text/plain"}
    mounted = await _mount(client, bucket, mount, 201)
    read = await client.get(f"/{bucket}/key-1", params={"offset": "-1"})
    assert read.status == 200, await read.text()
    assert await read.read() == b"".join(values)
    assert mounted["index"]["caught_up"] is True
    listing = await _body(await client.get(f"/{bucket}/streams"), 200)
    assert [stream["stream_id"] for stream in listing["streams"]] == ["key-1", "key-2"]


async def test_a_mount_still_indexing_at_the_deadline_answers_202(
    client: Client, kafka_bootstrap: str, unique: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mount whose index has not caught up when the PUT's wait ends (here: no wait at all)
    is answered 202 with `Retry-After` and the body a 201 carries; it serves reads once its
    index says `caught_up`."""
    monkeypatch.setattr(bucket_routes, "MOUNT_READY_S", 0.0)
    topic, bucket = f"slow-{unique}", f"slow-{unique}"
    values = await asyncio.to_thread(_fill_few, kafka_bootstrap, topic)
    body = json.dumps({"mount": {"topic": topic, "content_type": "text/plain"}})
    response = await client.put(f"/{bucket}", data=body, headers=JSON)
    assert response.status == 202, await response.text()
    assert response.headers["Retry-After"] == "1"
    assert response.headers["Location"].endswith(f"/{bucket}")
    accepted = await response.json()
    assert (accepted["mounted"], accepted["topic"]) == (True, topic)
    assert accepted["index"]["caught_up"] is False
    await _indexed(client, bucket)
    read = await client.get(f"/{bucket}/key-1", params={"offset": "-1"})
    assert (read.status, await read.read()) == (200, b"".join(values))


async def test_a_writable_mount_produces_plain_records(
    client: Client, kafka_bootstrap: str, unique: str
) -> None:
    topic, bucket = f"notes-{unique}", f"notes-{unique}"
    _create_topic(kafka_bootstrap, topic)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "partitioner": "murmur2_random"})
    producer.produce(topic, b"from kafka;", b"n-1")  # where a Java producer would put it
    assert producer.flush(30) == 0
    mount = {"topic": topic, "content_type": "text/plain", "appends": True}
    await _mount(client, bucket, mount, 201)
    await _indexed(client, bucket)
    text = {"Content-Type": "text/plain"}

    appended = await client.post(f"/{bucket}/n-1", data=b"from http", headers=text)
    assert appended.status == 204, await appended.text()
    data, tail = await _catch_up(client, f"/{bucket}/n-1")
    assert (data, tail) == (b"from kafka;from http", appended.headers["Stream-Next-Offset"])
    assert (await client.post(f"/{bucket}/new-key", data=b"first", headers=text)).status == 204
    assert (await _catch_up(client, f"/{bucket}/new-key"))[0] == b"first"

    refused = await client.post(f"/{bucket}/n-1", data=b"x", headers={**text, "Stream-Seq": "1"})
    assert (await _body(refused, 400))["error"]["code"] == "invalid_header"
    mismatch = await client.post(f"/{bucket}/n-1", data=b"{}", headers=JSON)
    assert (await _body(mismatch, 409))["error"]["code"] == "content_type_mismatch"
    assert (await client.delete(f"/{bucket}/n-1")).status == 405
    # Nor does any other change of a stream's state apply to a topic's key: each is refused
    # before anything is decided, by time or by offset alike.
    for change in (
        await client.post(f"/{bucket}/n-1/fence", headers={"Stream-Fencing-Token": "t"}),
        await client.post(f"/{bucket}/n-1/trim", json={"before": tail}),
        await client.post(f"/{bucket}/n-1/trim", json={"at": "2020-01-01T00:00:00Z"}),
        await client.put(f"/{bucket}/n-1/snapshot/{tail}", data=b"state", headers=text),
    ):
        assert (await _body(change, 405))["error"]["code"] == "mount_read_only"

    # Any consumer sees ordinary records: our key, our bytes, no headers, the key's partition.
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": f"plain-{unique}",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([topic])
    seen: list[tuple[bytes | None, bytes | None, int | None, object]] = []
    try:
        for _ in range(100):
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                seen.append(
                    (message.key(), message.value(), message.partition(), message.headers())
                )
            if len(seen) == 3:
                break
    finally:
        consumer.close()
    by_key = {(key, value): (partition, headers) for key, value, partition, headers in seen}
    assert set(by_key) == {(b"n-1", b"from kafka;"), (b"n-1", b"from http"), (b"new-key", b"first")}
    assert by_key[(b"n-1", b"from http")] == (by_key[(b"n-1", b"from kafka;")][0], None)


async def test_keys_past_the_index_bound_and_across_partitions_read_whole(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str
) -> None:
    """With 4 positions per key, older records are found by scanning the key's partitions;
    a key written to two partitions (as after a partition-count increase) reads partition by
    partition."""
    settings = make_settings(mount_index_positions_per_key=4, read_chunk_bytes=100)
    topic, bucket = f"bound-{unique}", f"bound-{unique}"
    _create_topic(settings.bootstrap_servers, topic)
    producer = Producer({"bootstrap.servers": settings.bootstrap_servers, "linger.ms": 5})
    expected: dict[bytes, list[bytes]] = defaultdict(list)
    for n in range(300):
        key = f"key-{n % 5}".encode()
        partition = 2 if key == b"key-4" and n >= 150 else n % 5 % 3  # key-4 "moves" to 2
        value = f"{key.decode()}:{n};".encode()
        producer.produce(topic, value, key, partition=partition)
        expected[key].append(value)
    assert producer.flush(30) == 0
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    await _mount(client, bucket, {"topic": topic, "content_type": "text/plain"}, 201)
    await _indexed(client, bucket)
    for key, values in expected.items():
        data, _ = await _catch_up(client, f"/{bucket}/{key.decode()}")
        assert data == b"".join(values), key
    # Unmounting ends the live readers of its keys (they would otherwise wait for nothing).
    sse = await client.get(f"/{bucket}/key-0", params={"offset": "now", "live": "sse"})
    assert (await sse.content.readline()).startswith(b"event: control")
    assert (await client.delete(f"/{bucket}")).status == 204
    rest = await asyncio.wait_for(sse.read(), 30)  # a guard against a hang, not a timing
    assert b"event: data" not in rest


async def test_a_restarted_instance_resumes_the_index_from_its_file(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str
) -> None:
    """The key index is saved with a checkpoint per partition: a restart reads no record
    already indexed (the indexer's `scanned` counter), serves the same bytes and tails, and
    goes on from the checkpoint. 8 positions per key: dropped ranges are saved too."""
    settings = make_settings(mount_index_positions_per_key=8)
    bootstrap = settings.bootstrap_servers
    topic, bucket = f"kept-{unique}", f"kept-{unique}"
    _create_topic(bootstrap, topic)
    expected = await asyncio.to_thread(_fill, bootstrap, topic)
    first = await aiohttp_client(create_app(settings))
    await wait_ready(first)
    await _mount(first, bucket, {"topic": topic}, 201)
    built = (await _indexed(first, bucket))["index"]
    assert (built["resumed"], built["scanned"]) == (False, built["records"] + 2)  # + 2 skipped
    paths = [f"/{bucket}/{_stream_id(key)}" for key in expected]
    before = [await _catch_up(first, path) for path in paths]
    await first.close()

    second = await aiohttp_client(create_app(settings))
    await wait_ready(second)
    resumed = (await _indexed(second, bucket))["index"]
    assert (resumed["resumed"], resumed["scanned"]) == (True, 0)
    assert resumed == built | {"scanned": 0, "resumed": True}  # counts included
    assert [await _catch_up(second, path) for path in paths] == before  # bytes and tails

    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, b"after the restart", b"k-005")
    assert producer.flush(30) == 0
    for _ in range(600):
        if (await _body(await second.get(f"/{bucket}"), 200))["index"]["scanned"] == 1:
            break
        await asyncio.sleep(0.05)
    data, _ = await _catch_up(second, f"/{bucket}/k-005")
    assert data == b"".join([*expected[b"k-005"], b"after the restart"])

    index_file = Path(settings.mount_index_dir) / f"{bucket}.sqlite"
    assert index_file.exists()
    assert (await second.delete(f"/{bucket}")).status == 204
    for _ in range(600):  # the indexer closes, then its file goes
        if not index_file.exists():
            break
        await asyncio.sleep(0.05)
    assert not index_file.exists()


def _plain_read(bootstrap: str, topic: str) -> list[tuple[bytes, bytes]]:
    """(key, value) of every committed record of the topic, as a plain read_committed
    consumer reads them to the end of each partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "never-joined",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
    seen: list[tuple[bytes, bytes]] = []
    ended: set[int | None] = set()
    try:
        for _ in range(200):
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is None:
                seen.append((message.key() or b"", message.value() or b""))
            elif error.code() == KafkaError._PARTITION_EOF:
                ended.add(message.partition())
                if len(ended) == 3:
                    return seen
    finally:
        consumer.close()
    raise AssertionError("the topic's end was never reached")


async def test_producer_retries_to_a_writable_mount_are_written_once(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str
) -> None:
    """Producer-Id/Epoch/Seq on a writable mount: the state commits with the records in one
    transaction, so a retry is a duplicate, also after a restart; gaps and stale epochs are
    refused as for our streams."""
    settings = make_settings()
    topic, bucket = f"once-{unique}", f"once-{unique}"
    _create_topic(settings.bootstrap_servers, topic)
    first = await aiohttp_client(create_app(settings))
    await wait_ready(first)
    await _mount(
        first, bucket, {"topic": topic, "content_type": "text/plain", "appends": True}, 201
    )
    await _indexed(first, bucket)

    def producer(epoch: int, seq: int) -> dict[str, str]:
        return {
            "Content-Type": "text/plain",
            "Producer-Id": "p-1",
            "Producer-Epoch": str(epoch),
            "Producer-Seq": str(seq),
        }

    path = f"/{bucket}/k"
    assert (await first.post(path, data=b"m0;", headers=producer(0, 0))).status == 200
    retried = await first.post(path, data=b"m0;", headers=producer(0, 0))
    assert (retried.status, retried.headers["Producer-Seq"]) == (204, "0")  # not written again
    assert (await first.post(path, data=b"m1;", headers=producer(0, 1))).status == 200
    gap = await first.post(path, data=b"m3;", headers=producer(0, 3))
    assert (await _body(gap, 409))["error"]["code"] == "producer_sequence_gap"
    await first.close()

    second = await aiohttp_client(create_app(settings))  # the state is in Kafka
    await wait_ready(second)
    await _indexed(second, bucket)
    assert (await second.post(path, data=b"m1;", headers=producer(0, 1))).status == 204
    assert (await second.post(path, data=b"m2;", headers=producer(0, 2))).status == 200
    assert (await second.post(path, data=b"n0;", headers=producer(1, 0))).status == 200
    stale = await second.post(path, data=b"old;", headers=producer(0, 3))
    assert (await _body(stale, 403))["error"]["code"] == "stale_producer_epoch"
    assert (await _catch_up(second, path))[0] == b"m0;m1;m2;n0;"
    seen = await asyncio.to_thread(_plain_read, settings.bootstrap_servers, topic)
    assert seen == [(b"k", b"m0;"), (b"k", b"m1;"), (b"k", b"m2;"), (b"k", b"n0;")]
