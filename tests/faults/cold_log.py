"""What the cold tier holds: the tier topic's ranges read by a fresh `read_committed` consumer
(the last value of each key, tombstones forgetting theirs), and the chunks they name fetched
from the object store with boto3 and decoded (never through an adapter or its caches)."""

from __future__ import annotations

from collections.abc import Iterable

from botocore.exceptions import ClientError
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from adapter.tier import chunks, manifest
from adapter.tier.manifest import TierRange
from tests.faults.history import ColdTier, LogRecord, Producer
from tests.faults.kafka_log import IDLE_POLLS, POLL_S, payload_of, stream_name
from tests.faults.kafka_probe import PROBE_KEY
from tests.faults.store import Store

PROBE_ID = PROBE_KEY.decode()  # the key the probe's records are tiered under


def tier_ranges(bootstrap: str, tier_topic: str) -> list[TierRange]:
    """Every range the tier topic lists now (compaction or not: the last value of a key)."""
    found: dict[str, bytes] = {}
    for key, value in _records(bootstrap, tier_topic):
        if value is None:
            found.pop(key, None)
        else:
            found[key] = value
    return [manifest.decode(key, value) for key, value in found.items()]


def _records(bootstrap: str, topic: str) -> Iterable[tuple[str, bytes | None]]:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    count = len(metadata.topics[topic].partitions)
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
    at_end: set[int] = set()
    idle = 0
    try:
        while len(at_end) < count and idle < IDLE_POLLS:
            message = consumer.poll(POLL_S)
            if message is None:
                idle += 1
                continue
            idle = 0
            if message.error() is not None:
                at_end.add(message.partition() or 0)
                continue
            yield (message.key() or b"").decode(), message.value()
    finally:
        consumer.close()
    if len(at_end) < count:
        raise AssertionError(f"{topic}: only {len(at_end)} of {count} partitions read to the end")


def cold_tier(store: Store, s3_bucket: str, ranges: list[TierRange], label: str) -> ColdTier:
    """The records of every chunk of `ranges` (one bucket incarnation's) but those collected,
    their streams named `label + stream id`; chunks the store does not hold are listed as
    missing."""
    client = store.client()
    tier = ColdTier()
    for tier_range in ranges:
        # A collected chunk (no stream needs it any more) is listed without an object.
        # The Kafka probe's records (kafka_probe.py) are tiered under their own key like any
        # stream's, though no stream has it: they are no stream's, as in the Kafka log.
        chunks = (c for c in tier_range.chunks if not c.collected and c.stream_id != PROBE_ID)
        for chunk in chunks:
            try:
                data = client.get_object(Bucket=s3_bucket, Key=chunk.object_key)["Body"].read()
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") not in ("NoSuchKey", "404"):
                    raise
                tier.missing.append(chunk.object_key)
                continue
            tier.records.extend(_decoded(stream_name(chunk.stream_id, label), data))
    return tier


def _decoded(stream: str, data: bytes) -> list[LogRecord]:
    return [
        LogRecord(
            stream,
            message.offset,
            payload_of(message.payload),
            producer=None if message.producer is None else Producer(*message.producer),
        )
        for message in chunks.decode(data)
    ]
