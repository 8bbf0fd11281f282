"""Cold chunks: one stream's data records of one tiered range, as an Avro object container file.

An Avro container (`schemas/tier_message.avsc`, deflate blocks) so Spark reads chunks with
`format("avro")` and any Avro tool can open one. The object key is a function of the range and
the stream alone, so a pass redone after a crash writes the same objects again, never new ones.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass

import fastavro

import schemas
from topology.wire import ProducerStamp, encode_token

OBJECT_PREFIX = "tier/"
_SCHEMA = fastavro.parse_schema(schemas.load("tier_message"))


@dataclass(frozen=True)
class ColdMessage:
    """One data record of a stream, as tiered: what a Kafka consumer would see of it."""

    offset: int
    content_type: str
    payload: bytes
    timestamp_ms: int = 0
    producer: ProducerStamp | None = None


def object_key(
    topic: str, epoch_ms: int, partition: int, start: int, end: int, stream_id: str
) -> str:
    """Where the chunk of `stream_id` in range [start, end) of a partition lives.

    The stream id is hashed: it may hold `/` and characters an object store or a folder
    spells badly. The topic's incarnation (its bucket's `created_at_ms`) keeps a re-created
    bucket's chunks apart from the old one's.
    """
    digest = hashlib.sha256(stream_id.encode()).hexdigest()[:32]
    return f"{OBJECT_PREFIX}{topic}/{epoch_ms}/{partition}/{start:020d}-{end:020d}/{digest}.avro"


def encode(bucket_id: str, stream_id: str, partition: int, messages: list[ColdMessage]) -> bytes:
    """The container file of one stream's messages, in offset order."""
    out = io.BytesIO()
    rows = (
        {
            "bucket_id": bucket_id,
            "stream_id": stream_id,
            "offset": message.offset,
            "offset_token": encode_token(message.offset),
            "content_type": message.content_type,
            "payload": message.payload,
            "partition": partition,
            "timestamp_ms": message.timestamp_ms,
            "producer_id": message.producer.producer_id if message.producer else None,
            "producer_epoch": message.producer.epoch if message.producer else None,
            "producer_seq": message.producer.seq if message.producer else None,
        }
        for message in messages
    )
    fastavro.writer(out, _SCHEMA, rows, codec="deflate")
    return out.getvalue()


def decode(data: bytes) -> list[ColdMessage]:
    """The messages of a container file written by `encode`."""
    messages = []
    for row in fastavro.reader(io.BytesIO(data)):
        if not isinstance(row, dict):
            raise ValueError("a chunk row is not a record")
        producer = None
        if row["producer_id"] is not None:
            producer = ProducerStamp(row["producer_id"], row["producer_epoch"], row["producer_seq"])
        messages.append(
            ColdMessage(
                row["offset"], row["content_type"], row["payload"], row["timestamp_ms"], producer
            )
        )
    return messages
