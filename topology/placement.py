"""Which partition of a bucket topic holds a stream: Kafka's default partitioner for keyed records.

The Java client's default partitioner puts a keyed record in partition
`toPositive(murmur2(key)) % partitions`; computing the same here lets any Kafka client, Spark
included, find a stream's partition from its key. librdkafka's own default is different
(`consistent_random`, CRC32): producers must either set `partitioner=murmur2_random` or
pass the partition computed here explicitly.
"""

from __future__ import annotations

from typing import Final

SEED: Final = 0x9747B28C
_M: Final = 0x5BD1E995
_R: Final = 24
_MASK: Final = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's `Utils.murmur2`: MurmurHash2, 32-bit, as a signed int like Java's."""
    length = len(data)
    h = (SEED ^ length) & _MASK
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = _mul(int.from_bytes(data[i : i + 4], "little"))
        k = _mul(k ^ (k >> _R))
        h = _mul(h) ^ k
    h = _tail(h, data[whole:])
    h = _mul(h ^ (h >> 13))
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: bytes, partitions: int) -> int:
    """The partition the Java client's default partitioner picks for a keyed record."""
    if partitions <= 0:
        raise ValueError(f"a topic has at least one partition, not {partitions}")
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def _tail(h: int, rest: bytes) -> int:
    """Mix in the last 0 to 3 bytes (the fall-through `switch` of the Java code)."""
    if not rest:
        return h
    return _mul(h ^ int.from_bytes(rest, "little"))


def _mul(value: int) -> int:
    return (value * _M) & _MASK
