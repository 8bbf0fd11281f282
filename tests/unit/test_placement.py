"""Kafka's murmur2 partitioner, checked against Kafka's own test vectors."""

from __future__ import annotations

import pytest

from topology.placement import murmur2, partition_for


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        # org.apache.kafka.common.utils.UtilsTest#testMurmur2
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
        (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        (b"abc", 479470107),
    ],
)
def test_murmur2_matches_kafka(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


@pytest.mark.parametrize(
    ("key", "partitions", "expected"),
    [
        # toPositive(-973932308) = 1173551340, toPositive(-790332482) = 1357151166
        (b"21", 1, 0),
        (b"21", 100, 40),
        (b"foobar", 12, 6),
        (b"foobar", 100, 66),
        (b"abc", 12, 3),
        (b"abc", 100, 7),
    ],
)
def test_partition_for(key: bytes, partitions: int, expected: int) -> None:
    assert partition_for(key, partitions) == expected


@pytest.mark.parametrize("length", range(9))
def test_every_tail_length_is_a_signed_32_bit_int(length: int) -> None:
    value = murmur2(bytes(range(200, 200 + length)))
    assert -(2**31) <= value < 2**31
    assert 0 <= partition_for(bytes(length), 7) < 7


@pytest.mark.parametrize("partitions", [0, -1])
def test_partition_for_needs_partitions(partitions: int) -> None:
    with pytest.raises(ValueError, match="at least one partition"):
        partition_for(b"key", partitions)
