"""What an append's data records carry in their headers, read back by a fresh read_committed
consumer: everything the stream's state learns from the append that is not in the record itself
(its producer's id, epoch and seq, its Stream-Seq), so the stream's state can be rebuilt from
its partition."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import Message

from tests.conftest import Client
from tests.kafka_reads import committed_messages
from topology.naming import bucket_topic
from topology.placement import partition_for
from topology.wire import (
    CONTROL_HEADER,
    PRODUCER_EPOCH_HEADER,
    PRODUCER_ID_HEADER,
    PRODUCER_SEQ_HEADER,
    STREAM_SEQ_HEADER,
    header_value,
)

pytestmark = pytest.mark.integration

JSON = {"Content-Type": "application/json"}


def _data_records(bootstrap: str, topic: str, stream: str, partitions: int) -> list[Message]:
    partition = partition_for(stream.encode(), partitions)
    return [
        message
        for message in committed_messages(bootstrap, topic, partition)
        if message.key() == stream.encode() and not header_value(message.headers(), CONTROL_HEADER)
    ]


def _close_records(bootstrap: str, topic: str, partition: int) -> list[Message]:
    return [
        message
        for message in committed_messages(bootstrap, topic, partition)
        if header_value(message.headers(), CONTROL_HEADER) == b"close"
    ]


async def test_each_record_of_an_append_carries_its_stream_seq_and_producer(
    client: Client, unique: str, kafka_bootstrap: str
) -> None:
    bucket = f"rh-{unique}"
    assert (await client.put(f"/{bucket}")).status == 201
    path = f"/{bucket}/orders"
    assert (await client.put(path, headers=JSON)).status == 201
    producer = {"Producer-Id": "writer-1", "Producer-Epoch": "2", "Producer-Seq": "0"}
    seqs = {**JSON, **producer, "Stream-Seq": "0007"}
    assert (await client.post(path, data=b"[1, 2]", headers=seqs)).status == 200
    assert (await client.post(path, data=b"3", headers=JSON)).status == 204
    topic = bucket_topic(f"t{unique}.", bucket)
    partitions = (await (await client.get(f"/{bucket}")).json())["partitions"]
    records = await asyncio.to_thread(_data_records, kafka_bootstrap, topic, "orders", partitions)
    names = (STREAM_SEQ_HEADER, PRODUCER_ID_HEADER, PRODUCER_EPOCH_HEADER, PRODUCER_SEQ_HEADER)
    headers = [{name: header_value(record.headers(), name) for name in names} for record in records]
    stamped = {
        STREAM_SEQ_HEADER: b"0007",
        PRODUCER_ID_HEADER: b"writer-1",
        PRODUCER_EPOCH_HEADER: b"2",
        PRODUCER_SEQ_HEADER: b"0",
    }
    bare = dict.fromkeys(stamped)
    assert headers == [stamped, stamped, bare]


async def test_the_close_record_of_a_close_only_append_carries_its_stream_seq_and_producer(
    client: Client, unique: str, kafka_bootstrap: str
) -> None:
    bucket = f"rc-{unique}"
    assert (await client.put(f"/{bucket}")).status == 201
    path = f"/{bucket}/orders"
    assert (await client.put(path, headers=JSON)).status == 201
    producer = {"Producer-Id": "writer-1", "Producer-Epoch": "0", "Producer-Seq": "0"}
    closing = {**producer, "Stream-Seq": "0001", "Stream-Closed": "true"}
    assert (await client.post(path, headers=closing)).status in (200, 204)
    topic = bucket_topic(f"t{unique}.", bucket)
    partitions = (await (await client.get(f"/{bucket}")).json())["partitions"]
    partition = partition_for(b"orders", partitions)
    messages = await asyncio.to_thread(_close_records, kafka_bootstrap, topic, partition)
    (close,) = messages
    names = (STREAM_SEQ_HEADER, PRODUCER_ID_HEADER, PRODUCER_EPOCH_HEADER, PRODUCER_SEQ_HEADER)
    assert [header_value(close.headers(), name) for name in names] == [
        b"0001",
        b"writer-1",
        b"0",
        b"0",
    ]
