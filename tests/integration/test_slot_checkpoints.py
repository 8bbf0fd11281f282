"""From format level 7 a pure append commits its data record alone: the stream's state reaches
the meta and producers topics by its slot's checkpoint, every `slot_checkpoint_ms` and at a
clean hand-over, one record per stream however many appends it took. On the real broker."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from adapter.app import PARTS, create_app
from adapter.protocol.model import ProducerRecord, StreamMeta
from adapter.state.format_gate import GATE
from adapter.state.records import decode_as
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready
from tests.integration.test_tiering import log_start, tier_settings, tier_until_done
from tests.kafka_reads import committed_messages
from tests.services import S3Server
from topology.internal_records import NEWEST_LEVEL, stream_meta_key
from topology.naming import StateTopics, bucket_topic
from topology.wire import decode_token

TEXT = {"Content-Type": "text/plain"}
KEY = stream_meta_key("shop", "log")


def _producer(seq: int) -> dict[str, str]:
    return {"Producer-Id": "writer-1", "Producer-Epoch": "0", "Producer-Seq": str(seq)}


def _records(bootstrap: str, topic: str, key_start: str) -> list[bytes]:
    """The committed values of `topic` whose key starts with `key_start`, in order."""
    return [
        message.value() or b""
        for message in committed_messages(bootstrap, topic)
        if (message.key() or b"").decode().startswith(key_start)
    ]


async def _instance(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, checkpoint_ms: int, name: str
) -> Client:
    settings = make_settings(
        instance_id=name, partitions=1, write_slots=1, slot_checkpoint_ms=checkpoint_ms
    )
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    assert GATE.level == NEWEST_LEVEL  # a fresh deployment
    return client


async def _appended(client: Client, count: int) -> str:
    assert (await client.put("/shop")).status == 201
    assert (await client.put("/shop/log", headers=TEXT)).status == 201
    tail = ""
    for seq in range(count):
        answer = await client.post("/shop/log", data=b"m", headers={**TEXT, **_producer(seq)})
        assert answer.status == 200
        tail = answer.headers["Stream-Next-Offset"]
    return tail


async def _writing(client: Client) -> None:
    """Wait (60 s at most) until the instance's writer of the only write slot is ready."""
    for _ in range(600):
        if 0 in client.app[PARTS].writers.ready:
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the write slot never moved here")


async def _checkpointed(bootstrap: str, meta_topic: str, more_than: int) -> list[bytes]:
    """The stream's meta records once the last counts more than `more_than` messages (a
    checkpoint of its appends), looked for every 0.1 s for 10 s."""
    for _ in range(100):
        written = _records(bootstrap, meta_topic, KEY)
        if decode_as(StreamMeta, KEY, written[-1]).message_count > more_than:
            return written
        await asyncio.sleep(0.1)
    raise AssertionError("no checkpoint of the stream's appends")


async def test_pure_appends_write_no_state_until_the_hand_over_writes_it_once(
    aiohttp_client: ClientFactory,
    make_settings: SettingsFactory,
    kafka_bootstrap: str,
    tmp_path: Path,
) -> None:
    topics = StateTopics.of(make_settings().topic_prefix)
    client = await _instance(aiohttp_client, make_settings, 600_000, "only")
    tail = await _appended(client, 5)
    created = _records(kafka_bootstrap, topics.meta, KEY)
    assert len(created) == 1  # the creation's, not one per append
    assert decode_as(StreamMeta, KEY, created[0]).message_count == 0
    assert _records(kafka_bootstrap, topics.producers, "shop/log") == []
    await client.close()  # a clean stop hands the slot over: its checkpoint is written
    [*_, handed] = _records(kafka_bootstrap, topics.meta, KEY)
    assert len(_records(kafka_bootstrap, topics.meta, KEY)) == 2
    meta = decode_as(StreamMeta, KEY, handed)
    assert (meta.message_count, meta.next_offset) == (5, decode_token(tail))
    [producer] = _records(kafka_bootstrap, topics.producers, "shop/log")
    assert decode_as(ProducerRecord, "shop/log\x00writer-1", producer).last_seq == 4


async def test_the_owner_checkpoints_its_changed_streams_every_interval(
    aiohttp_client: ClientFactory,
    make_settings: SettingsFactory,
    kafka_bootstrap: str,
) -> None:
    topics = StateTopics.of(make_settings().topic_prefix)
    client = await _instance(aiohttp_client, make_settings, 200, "only")
    await _appended(client, 3)
    written = await _checkpointed(kafka_bootstrap, topics.meta, more_than=2)
    await asyncio.sleep(0.5)  # more intervals, and nothing changed: nothing written
    assert len(_records(kafka_bootstrap, topics.meta, KEY)) == len(written) <= 3


async def test_a_stream_appended_to_without_a_pause_is_checkpointed(
    aiohttp_client: ClientFactory,
    make_settings: SettingsFactory,
    kafka_bootstrap: str,
) -> None:
    """Pure appends always in flight (four writers, no pause) do not hold its checkpoint back."""
    topics = StateTopics.of(make_settings().topic_prefix)
    client = await _instance(aiohttp_client, make_settings, 200, "only")
    await _appended(client, 1)
    stop = asyncio.Event()

    async def writer() -> None:
        while not stop.is_set():
            assert (await client.post("/shop/log", data=b"m", headers=TEXT)).status == 204

    writers = [asyncio.ensure_future(writer()) for _ in range(4)]
    try:
        await _checkpointed(kafka_bootstrap, topics.meta, more_than=1)
    finally:
        stop.set()
        await asyncio.gather(*writers)


@pytest.mark.parametrize("noted", [True, False], ids=["noted", "unnoted"])
async def test_kafka_frees_no_record_its_streams_metadata_does_not_show(
    aiohttp_client: ClientFactory,
    make_settings: SettingsFactory,
    kafka_bootstrap: str,
    unique: str,
    s3: S3Server,
    noted: bool,
) -> None:
    """Tiering frees a partition's records only once the streams they belong to are
    checkpointed: the stream's metadata shows the appends Kafka no longer holds, so another
    instance (its own catalog from the meta topic, the records gone from the partition)
    answers the owner's tail and every message. `unnoted`: the owner's notes of what to
    checkpoint are gone (as when its tail was learned from the data log by a reader here before
    this instance took the slot, or a hand-over could not write them): the range's own
    streams are checkpointed all the same."""
    chosen = {
        "write_slots": 1,
        "slot_checkpoint_ms": 600_000,
        "tier_interval_ms": 3_600_000,
        "tier_after_bytes": 0,
    }
    settings = tier_settings(make_settings, s3, unique, instance_id="owner", **chosen)
    owner = await aiohttp_client(create_app(settings))
    await wait_ready(owner)
    tail = await _appended(owner, 5)
    if not noted:
        owner.app[PARTS].checkpoints.notes.hand_over(0)  # the notes dropped, nothing written
    assert await tier_until_done(owner) > 0
    start, _ = await asyncio.to_thread(
        log_start, kafka_bootstrap, bucket_topic(settings.topic_prefix, "shop")
    )
    assert start >= decode_token(tail) - 1  # the appends' records are gone from Kafka
    meta = decode_as(
        StreamMeta,
        KEY,
        _records(kafka_bootstrap, StateTopics.of(settings.topic_prefix).meta, KEY)[-1],
    )
    assert (meta.message_count, meta.next_offset) == (5, decode_token(tail))

    for _ in range(2):  # records Kafka still holds, past the checkpoint
        after = await owner.post("/shop/log", data=b"n", headers=TEXT)
        assert after.status == 204
    tail = after.headers["Stream-Next-Offset"]

    other = tier_settings(make_settings, s3, unique, instance_id="other", **chosen)
    reader = await aiohttp_client(create_app(other))
    await wait_ready(reader)
    head = await reader.head("/shop/log")
    assert (head.status, head.headers["Stream-Next-Offset"]) == (200, tail)
    read = await reader.get("/shop/log", params={"offset": "-1"})
    assert (read.status, await read.read()) == (200, b"m" * 5 + b"nn")


@pytest.mark.parametrize("restarted", [False, True], ids=["running", "restarted"])
async def test_a_tail_learned_from_the_data_log_is_checkpointed_by_the_next_owner(
    aiohttp_client: ClientFactory,
    make_settings: SettingsFactory,
    kafka_bootstrap: str,
    restarted: bool,
) -> None:
    """An instance that reads a stream written elsewhere learns its tail from the stream's
    records (its metadata still shows the creation's). When it then takes the stream's slot
    from an owner whose hand-over could not write the stream, its scan finds nothing past the
    tail it knows: the stream, ahead of its records, is checkpointed all the same (every
    producer of it), so no one scans its partition from the creation's tail any more.
    `restarted`: the reader stopped and started again in between, its catalog resumed from its
    file (which holds the learned tail)."""
    topics = StateTopics.of(make_settings().topic_prefix)
    owner = await _instance(aiohttp_client, make_settings, 600_000, "owner")
    tail = await _appended(owner, 5)
    reader = await _instance(aiohttp_client, make_settings, 200, "reader")
    assert reader.app[PARTS].writers.assigned == frozenset()  # the owner keeps the slot
    head = await reader.head("/shop/log")
    assert (head.status, head.headers["Stream-Next-Offset"]) == (200, tail)
    [created] = _records(kafka_bootstrap, topics.meta, KEY)
    assert decode_as(StreamMeta, KEY, created).message_count == 0  # learned from the data log
    if restarted:
        await reader.close()
        reader = await _instance(aiohttp_client, make_settings, 200, "reader")
        assert reader.app[PARTS].follower.resumed_from is not None

    owner.app[PARTS].checkpoints.notes.hand_over(0)  # the notes dropped, nothing written
    await owner.close()  # the slot moves to the reader; its hand-over writes no stream
    await _writing(reader)

    [*_, checkpointed] = await _checkpointed(kafka_bootstrap, topics.meta, more_than=4)
    meta = decode_as(StreamMeta, KEY, checkpointed)
    assert (meta.message_count, meta.next_offset) == (5, decode_token(tail))
    [producer] = _records(kafka_bootstrap, topics.producers, "shop/log")
    assert decode_as(ProducerRecord, "shop/log\x00writer-1", producer).last_seq == 4


async def test_a_write_that_records_its_stream_records_the_producers_its_appends_moved(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, kafka_bootstrap: str
) -> None:
    """A trim commits the stream's metadata record, its tail past a pure append of another
    producer whose state no record shows yet: that state is committed with it. Else a new
    owner (carrying the stream forward only from that tail) would take the producer's retry of
    the append, unanswered when the owner stopped without a checkpoint, for a new one."""
    topics = StateTopics.of(make_settings().topic_prefix)
    owner = await _instance(aiohttp_client, make_settings, 600_000, "owner")
    first = await _appended(owner, 1)  # writer-1's message
    second = {**TEXT, "Producer-Id": "writer-2", "Producer-Epoch": "0"}
    answer = await owner.post("/shop/log", data=b"a", headers={**second, "Producer-Seq": "0"})
    assert answer.status == 200
    assert await owner.app[PARTS].checkpoints.write(0) == 1  # writer-2 at seq 0 recorded
    answer = await owner.post("/shop/log", data=b"b", headers={**second, "Producer-Seq": "1"})
    assert answer.status == 200
    tail = answer.headers["Stream-Next-Offset"]
    assert (await owner.post("/shop/log/trim", json={"before": first})).status == 204

    [*_, trimmed] = _records(kafka_bootstrap, topics.meta, KEY)
    assert decode_as(StreamMeta, KEY, trimmed).next_offset == decode_token(tail)
    [*_, state] = _records(kafka_bootstrap, topics.producers, "shop/log\x00writer-2")
    assert decode_as(ProducerRecord, "shop/log\x00writer-2", state).last_seq == 1

    reader = await _instance(aiohttp_client, make_settings, 600_000, "reader")
    owner.app[PARTS].checkpoints.notes.hand_over(0)  # stopped before any checkpoint
    await owner.close()  # the slot moves to the reader; its hand-over writes no stream
    await _writing(reader)
    retried = await reader.post("/shop/log", data=b"b", headers={**second, "Producer-Seq": "1"})
    assert retried.status in (200, 204), await retried.text()
    assert retried.headers["Stream-Next-Offset"] == tail  # a duplicate: nothing written
    read = await reader.get("/shop/log", params={"offset": first})  # the trim's point
    assert (read.status, await read.read()) == (200, b"ab")
