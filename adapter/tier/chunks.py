"""Cold chunks: one stream's data records of one tiered range, as an Avro object container file.

An Avro container (`schemas/tier_message.avsc`, deflate blocks) so Spark reads chunks with
`format("avro")` and any Avro tool can open one. The object key holds the range, the stream and
the attempt at the range (a random id each time a pass tiers it): a pass redone after a failure
writes new objects, never over those of an earlier attempt, so an object the orphan sweep has
judged is never one a manifest may still list (docs/explanation/cold-tier.md, "Why the sweep
never deletes a listed chunk"). Readers find chunks by the keys their range's manifest record
lists, never by computing them.

Blocks hold about `BLOCK_BYTES` of payload each, and the header's metadata carries their index
(`INDEX_KEY`: each block's first offset and byte position), so a reader fetches the header and
then only the blocks it needs, by ranged GETs (`cold.py`). Avro readers ignore metadata they do
not know; a chunk without the index (written before it existed) is read whole.
"""

from __future__ import annotations

import bisect
import hashlib
import io
import json
import secrets
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import fastavro
from fastavro.read import HEADER_SCHEMA

import schemas
from topology.wire import ProducerStamp, encode_token

OBJECT_PREFIX = "tier/"
_SCHEMA = fastavro.parse_schema(schemas.load("tier_message"))
CODEC = "deflate"
BLOCK_BYTES = 256 * 1024  # of payload per Avro block (a block holds at least one message)
INDEX_KEY = "durable_kafka.blocks"
_WHOLE = 1 << 62  # a sync interval no block reaches: each writer call makes one block


class Incomplete(Exception):
    """The bytes given end before the container's header does."""


@dataclass(frozen=True)
class Block:
    first_offset: int
    start: int  # byte position in the object
    end: int


@dataclass(frozen=True)
class Layout:
    """What a reader needs to fetch single blocks: the header (each block is decoded behind
    it) and the blocks in order."""

    header: bytes
    blocks: tuple[Block, ...]

    def block_at(self, offset: int) -> int:
        """The index of the block holding `offset` (or where it would be)."""
        firsts = [block.first_offset for block in self.blocks]
        return max(0, bisect.bisect_right(firsts, offset) - 1)

    @property
    def size(self) -> int:
        return len(self.header) + 24 * len(self.blocks)

    @classmethod
    def whole(cls, first_offset: int, size: int) -> Layout:
        """One block that is the whole object (header and all): a small or unindexed chunk."""
        return cls(b"", (Block(first_offset, 0, size),))


@dataclass(frozen=True)
class ColdMessage:
    """One data record of a stream, as tiered: what a Kafka consumer would see of it."""

    offset: int
    content_type: str
    payload: bytes
    timestamp_ms: int = 0
    producer: ProducerStamp | None = None


def new_attempt() -> str:
    """The id of one attempt at tiering a range: unique across passes, instances, restarts."""
    return secrets.token_hex(8)


def object_key(
    topic: str, epoch_ms: int, partition: int, start: int, end: int, stream_id: str, attempt: str
) -> str:
    """Where attempt `attempt` puts the chunk of `stream_id` in range [start, end).

    The stream id is hashed: it may hold `/` and characters an object store or a folder
    spells badly. The topic's incarnation (its bucket's `created_at_ms`) keeps a re-created
    bucket's chunks apart from the old one's.
    """
    digest = hashlib.sha256(stream_id.encode()).hexdigest()[:32]
    span = f"{start:020d}-{end:020d}"
    return f"{OBJECT_PREFIX}{topic}/{epoch_ms}/{partition}/{span}/{attempt}/{digest}.avro"


def encode(bucket_id: str, stream_id: str, partition: int, messages: list[ColdMessage]) -> bytes:
    """The container file of one stream's messages, in offset order, with its block index.

    Each block is written behind a bare header (same schema, codec and sync marker) and cut
    off it; the index header is written last, so block positions count from its end."""
    marker = hashlib.sha256(f"{bucket_id}\n{stream_id}\n{partition}".encode()).digest()[:16]
    bare = _container([], marker, {})
    bodies: list[bytes] = []
    entries: list[list[int]] = []
    position = 0
    for group in _groups(messages):
        body = _container(_rows(bucket_id, stream_id, partition, group), marker, {})[len(bare) :]
        entries.append([group[0].offset, position])
        bodies.append(body)
        position += len(body)
    index = json.dumps({"blocks": entries, "end": position}, separators=(",", ":"))
    return _container([], marker, {INDEX_KEY: index}) + b"".join(bodies)


def _container(rows: Iterable[dict[str, Any]], marker: bytes, metadata: dict[str, str]) -> bytes:
    out = io.BytesIO()
    fastavro.writer(
        out, _SCHEMA, rows, CODEC, sync_interval=_WHOLE, metadata=metadata, sync_marker=marker
    )
    return out.getvalue()


def _groups(messages: list[ColdMessage]) -> Iterator[list[ColdMessage]]:
    group: list[ColdMessage] = []
    size = 0
    for message in messages:
        if group and size + len(message.payload) > BLOCK_BYTES:
            yield group
            group, size = [], 0
        group.append(message)
        size += len(message.payload)
    if group:
        yield group


def layout(head: bytes) -> Layout | None:
    """The layout from the first bytes of a chunk, or None if it has no block index; raises
    `Incomplete` when `head` ends inside the header."""
    stream = io.BytesIO(head)
    try:
        header: Any = fastavro.schemaless_reader(stream, HEADER_SCHEMA, None)
    except EOFError as error:
        raise Incomplete from error
    size = stream.tell()
    raw = header["meta"].get(INDEX_KEY)
    if raw is None:
        return None
    index = json.loads(raw)
    starts = [size + position for _, position in index["blocks"]] + [size + index["end"]]
    blocks = tuple(
        Block(first, start, end)
        for (first, _), start, end in zip(index["blocks"], starts, starts[1:], strict=False)
    )
    return Layout(head[:size], blocks)


def _rows(
    bucket_id: str, stream_id: str, partition: int, messages: list[ColdMessage]
) -> Iterator[dict[str, Any]]:
    return (
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


def decode(data: bytes) -> list[ColdMessage]:
    """The messages of a container file written by `encode` (or of its header followed by
    some of its blocks)."""
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
