"""Cold chunks: Avro container files read back byte for byte, and the bounded chunk cache."""

from __future__ import annotations

import io
from typing import Any

import fastavro

from adapter.tier.chunks import ColdMessage, decode, encode, new_attempt, object_key
from adapter.tier.cold import ChunkCache
from topology.wire import ProducerStamp

MESSAGES = [
    ColdMessage(3, "application/octet-stream", bytes(range(256)), 1_700_000_000_000),
    ColdMessage(7, "application/octet-stream", b"", 5, ProducerStamp("p-1", 2, 9)),
    ColdMessage(2**40, "text/plain", "é\r\n".encode()),
]


def test_a_chunk_reads_back_exactly() -> None:
    assert decode(encode("b", "s", 4, MESSAGES)) == MESSAGES


def test_a_chunk_is_a_plain_avro_container_with_offset_tokens() -> None:
    rows: list[Any] = list(fastavro.reader(io.BytesIO(encode("b", "a/b", 4, MESSAGES))))
    assert (rows[1]["producer_id"], rows[1]["producer_seq"]) == ("p-1", 9)
    assert rows[0] == {
        "bucket_id": "b",
        "stream_id": "a/b",
        "offset": 3,
        "offset_token": "0000000000000000_0000000000000003",
        "content_type": "application/octet-stream",
        "payload": bytes(range(256)),
        "partition": 4,
        "timestamp_ms": 1_700_000_000_000,
        "producer_id": None,
        "producer_epoch": None,
        "producer_seq": None,
    }


def test_object_keys_are_unique_per_attempt_at_a_range() -> None:
    key = object_key("p.bucket.b", 17, 0, 5, 9, "s/../x", "a1")
    assert key == object_key("p.bucket.b", 17, 0, 5, 9, "s/../x", "a1")
    assert key.startswith("tier/p.bucket.b/17/0/00000000000000000005-00000000000000000009/a1/")
    assert ".." not in key
    assert key != object_key("p.bucket.b", 18, 0, 5, 9, "s/../x", "a1")
    assert key != object_key("p.bucket.b", 17, 0, 5, 9, "s/../x", "a2")  # a redone pass
    assert len({new_attempt() for _ in range(100)}) == 100


def test_the_cache_drops_the_least_recently_used_past_its_bound() -> None:
    cache: ChunkCache[list[ColdMessage]] = ChunkCache(100)
    cache.put("a", MESSAGES[:1], 60)
    cache.put("b", MESSAGES[1:], 30)
    assert cache.get("a") is not None  # a is now the most recently used
    cache.put("c", MESSAGES, 40)
    assert (cache.get("a"), cache.get("b")) == (MESSAGES[:1], None)
    assert cache.size == 100
    cache.put("huge", MESSAGES, 101)
    assert cache.get("huge") is None
