"""Every committed record of a bucket topic, read by a fresh `read_committed` consumer and
decoded with topology/wire.py (never through an adapter or its cache)."""

from __future__ import annotations

import json

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.faults.history import LogRecord, Producer
from tests.faults.kafka_probe import PROBE_HEADER
from topology import wire

POLL_S = 1.0
IDLE_POLLS = 10


def committed_log(bootstrap: str, topic: str, label: str = "") -> list[LogRecord]:
    """`label`: put before each record's stream id (`{bucket}/` for a bucket besides the
    default one)."""
    partitions = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    count = len(partitions.topics[topic].partitions)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "fault-checker-never-joins",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(count)])
    records: list[LogRecord] = []
    at_end: set[int] = set()
    idle = 0
    try:
        while len(at_end) < count and idle < IDLE_POLLS:
            message = consumer.poll(POLL_S)
            if message is None:
                idle += 1
                continue
            idle = 0
            error = message.error()
            if error is not None:
                at_end.add(message.partition() or 0)
                continue
            if wire.header_value(message.headers(), PROBE_HEADER) is not None:
                continue  # the Kafka probe's own (kafka_probe.py)
            records.append(
                decode(
                    message.key() or b"",
                    message.offset() or 0,
                    message.value() or b"",
                    message.headers(),
                    label,
                )
            )
    finally:
        consumer.close()
    if len(at_end) < count:
        raise AssertionError(f"{topic}: only {len(at_end)} of {count} partitions read to the end")
    return records


def decode(
    key: bytes, offset: int, value: bytes, headers: wire.ReadHeaders, label: str = ""
) -> LogRecord:
    stream = stream_name(key.decode(), label)
    if wire.is_control(headers):
        event = wire.header_value(headers, wire.CONTROL_HEADER)
        return LogRecord(stream, offset, None, (event or b"").decode())
    return LogRecord(stream, offset, payload_of(value), producer=_producer(headers))


def stream_name(record_id: str, label: str) -> str:
    """The load's name of the stream whose records are keyed `record_id` in a topic whose own
    streams are named `label + id`: a fork housed there from another bucket is keyed
    `{bucket}//{id}` (topology/wire.py `housed_key`), named `{bucket}/{id}`."""
    bucket, stream_id = wire.owner_of_key("", record_id)
    return f"{bucket}/{stream_id}" if bucket else label + stream_id


def payload_of(message: bytes) -> str:
    """The id the load put in each JSON message: `{"p": "<id>"}`."""
    return str(json.loads(message)["p"])


def _producer(headers: wire.ReadHeaders) -> Producer | None:
    pid = wire.header_value(headers, wire.PRODUCER_ID_HEADER)
    if pid is None:
        return None
    epoch = wire.header_value(headers, wire.PRODUCER_EPOCH_HEADER) or b"0"
    seq = wire.header_value(headers, wire.PRODUCER_SEQ_HEADER) or b"0"
    return Producer(pid.decode(), int(epoch), int(seq))


def log_starts(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition's log start offset (where retention or tiering freed it up to)."""
    partitions = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fault-checker-never-joins"})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[0]
            for p in partitions.topics[topic].partitions
        }
    finally:
        consumer.close()
