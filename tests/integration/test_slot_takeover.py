"""A write slot's next owner carries its streams forward over the records committed after their
state records (`adapter/state/slot_takeover.py`): an append an owner committed without a state
record (written here by a plain transactional producer, with the headers every data record
carries) is in the next owner's tail, a retry of its producer's seq is a duplicate, and the
slot's next checkpoint writes the state carried forward. Its scan starts at the partition's
covered offset (`adapter/state/covered_offsets.py`), not at a quiet stream's tail far below.
On the real broker."""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from adapter.app import create_app
from adapter.protocol.model import StreamMeta
from adapter.state.records import decode_as
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready
from tests.kafka_reads import committed_messages
from topology.internal_records import stream_meta_key
from topology.naming import StateTopics, bucket_topic
from topology.wire import ProducerStamp, data_headers, decode_token

TEXT = {"Content-Type": "text/plain"}


def _producer(seq: int) -> dict[str, str]:
    return {"Producer-Id": "writer-1", "Producer-Epoch": "0", "Producer-Seq": str(seq)}


def _committed_without_state(bootstrap: str, topic: str, seq: int) -> None:
    """One data record of an append by `writer-1` at `seq`, committed with no state record."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-bare"})
    producer.init_transactions(30)
    producer.begin_transaction()
    headers = data_headers("text/plain", ProducerStamp("writer-1", 0, seq))
    producer.produce(topic, b"unannounced", key=b"log", partition=0, headers=headers)
    producer.commit_transaction(30)


async def _instance(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, name: str, tmp_path: Path
) -> Client:
    settings = make_settings(
        instance_id=name,
        advertise_url=f"http://{name}:4437",
        catalog_dir=str(tmp_path / name),
        partitions=1,
        write_slots=1,
        slot_checkpoint_ms=200,
    )
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    return client


@pytest.mark.parametrize("made_again", [False, True])
async def test_the_next_owner_carries_a_stream_over_an_append_without_its_state_record(
    aiohttp_client: ClientFactory,
    make_settings: SettingsFactory,
    kafka_bootstrap: str,
    tmp_path: Path,
    made_again: bool,
) -> None:
    first = await _instance(aiohttp_client, make_settings, "first", tmp_path)
    assert (await first.put("/shop")).status == 201
    if made_again:  # the scan starts below the stream's earlier incarnation
        assert (await first.put("/shop/idle", headers=TEXT)).status == 201
        assert (await first.put("/shop/log", headers=TEXT)).status == 201
        assert (await first.delete("/shop/log")).status == 204
    assert (await first.put("/shop/log", headers=TEXT)).status == 201
    appended = await first.post("/shop/log", data=b"a", headers={**TEXT, **_producer(0)})
    assert appended.status == 200
    tail = appended.headers["Stream-Next-Offset"]
    topic = bucket_topic(make_settings().topic_prefix, "shop")
    _committed_without_state(kafka_bootstrap, topic, seq=1)
    await first.close()  # a clean stop: the slot moves to the next instance

    second = await _instance(aiohttp_client, make_settings, "second", tmp_path)
    head = await second.head("/shop/log")
    assert head.headers["Stream-Next-Offset"] > tail
    read = await second.get("/shop/log", params={"offset": tail})
    assert await read.read() == b"unannounced"
    retried = await second.post("/shop/log", data=b"unannounced", headers={**TEXT, **_producer(1)})
    assert retried.status == 204  # a duplicate: written once, by the first owner
    assert (await second.head("/shop/log")).headers["Stream-Next-Offset"] == head.headers[
        "Stream-Next-Offset"
    ]
    # No state record showed what the first owner wrote: the slot's checkpoint writes it.
    carried = decode_token(head.headers["Stream-Next-Offset"])
    prefix = make_settings().topic_prefix
    for _ in range(100):
        if _meta_tail(kafka_bootstrap, prefix) == carried:
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError("the carried-forward state was never checkpointed")
    following = await second.post("/shop/log", data=b"b", headers={**TEXT, **_producer(2)})
    assert following.status == 200


def _meta_tail(bootstrap: str, prefix: str) -> int:
    """The tail in the stream's last record of the meta topic."""
    key = stream_meta_key("shop", "log")
    topic = StateTopics.of(prefix).meta
    values = [
        m.value() or b"" for m in committed_messages(bootstrap, topic) if m.key() == key.encode()
    ]
    return decode_as(StreamMeta, key, values[-1]).next_offset


BUSY = 300  # appends to a busy stream after a quiet one's last


def _covered(bootstrap: str, prefix: str, topic: str) -> int:
    """The partition's covered offset as committed (negative: none)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{prefix}covered"})
    try:
        [found] = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        return int(found.offset)
    finally:
        consumer.close()


async def test_the_next_owner_scans_from_the_covered_offset_not_a_quiet_streams_tail(
    aiohttp_client: ClientFactory,
    make_settings: SettingsFactory,
    kafka_bootstrap: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    first = await _instance(aiohttp_client, make_settings, "first", tmp_path)
    assert (await first.put("/shop")).status == 201
    for stream in ("quiet", "busy", "log"):
        assert (await first.put(f"/shop/{stream}", headers=TEXT)).status == 201
    assert (await first.post("/shop/quiet", data=b"q", headers=TEXT)).status == 204
    for seq in range(BUSY):
        busy = await first.post("/shop/busy", data=b"b", headers={**TEXT, **_producer(seq)})
        assert busy.status == 200
    prefix = make_settings().topic_prefix
    topic = bucket_topic(prefix, "shop")
    busy_tail = decode_token(busy.headers["Stream-Next-Offset"])
    for _ in range(100):  # the owner's checkpoints cover the busy stream's records
        if await asyncio.to_thread(_covered, kafka_bootstrap, prefix, topic) >= busy_tail:
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError("no checkpoint covered the partition past the busy stream")
    _committed_without_state(kafka_bootstrap, topic, seq=0)  # past the covered offset
    await first.close()

    caplog.set_level(logging.INFO, logger="adapter.state.slot_takeover")
    second = await _instance(aiohttp_client, make_settings, "second", tmp_path)
    [line] = [r.getMessage() for r in caplog.records if "carried forward over" in r.getMessage()]
    scanned = re.search(r"over (\d+) records", line)
    assert scanned is not None, line
    assert int(scanned.group(1)) < 10, line  # not the busy stream's records
    assert "1 of 1 partitions covered" in line
    # What the scan skipped was in the state records; what lay past it is carried forward.
    assert await (await second.get("/shop/quiet", params={"offset": "-1"})).read() == b"q"
    head = await second.head("/shop/busy")
    assert decode_token(head.headers["Stream-Next-Offset"]) == busy_tail
    retried = await second.post("/shop/busy", data=b"b", headers={**TEXT, **_producer(BUSY - 1)})
    assert retried.status == 204
    read = await second.get("/shop/log", params={"offset": "-1"})
    assert await read.read() == b"unannounced"
    again = await second.post("/shop/log", data=b"unannounced", headers={**TEXT, **_producer(0)})
    assert again.status == 204  # the bare producer's append, found past the covered offset
