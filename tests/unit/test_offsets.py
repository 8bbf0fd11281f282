"""Offset tokens and the start position of a read."""

from __future__ import annotations

import pytest

from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.offsets import BEGINNING, NOW, Start, encode, parse_offset


@pytest.mark.parametrize(
    ("kafka_offset", "token"),
    [
        (0, "0000000000000000_0000000000000000"),
        (42, "0000000000000000_0000000000000042"),
        (10**16, "0000000000000001_0000000000000000"),
        (2**63 - 1, "0000000000000922_3372036854775807"),
    ],
)
def test_encode(kafka_offset: int, token: str) -> None:
    assert encode(kafka_offset) == token
    assert parse_offset(token) == kafka_offset


@pytest.mark.parametrize(
    ("low", "high"), [(0, 1), (9, 10), (99, 100), (10**16 - 1, 10**16), (123456789, 2**62)]
)
def test_lexicographic_order_is_numeric_order(low: int, high: int) -> None:
    assert encode(low) < encode(high)


@pytest.mark.parametrize("kafka_offset", [-1, -2, 2**63])
def test_encode_refuses_what_kafka_cannot_hold(kafka_offset: int) -> None:
    with pytest.raises(ValueError, match="outside"):
        encode(kafka_offset)


@pytest.mark.parametrize(("value", "start"), [(None, BEGINNING), ("-1", BEGINNING), ("now", NOW)])
def test_sentinels(value: str | None, start: Start) -> None:
    assert parse_offset(value) is start


def test_sentinel_values_are_the_wire_values() -> None:
    assert (Start.BEGINNING.value, Start.NOW.value) == ("-1", "now")


@pytest.mark.parametrize(
    "value",
    [
        "",  # Protocol Edge Cases: should reject empty offset parameter
        "0,1",  # should reject malformed offset (contains comma)
        "0 1",  # should reject offset with spaces
        "../x",  # Offset Validation Properties: path traversal, NUL, newlines, commas, slashes
        "x/..",
        "/..",
        "abc\0",
        "abc\n",
        "\r\n",
        "a/b",
        "a",
        "NOW",
        "Now",
        "-2",
        "-01",
        "1",
        "0" * 32,
        "0" * 15 + "_" + "0" * 16,
        "0" * 16 + "_" + "0" * 17,
        "0" * 16 + "-" + "0" * 16,
        "+000000000000000_0000000000000001",
        " 0000000000000000_0000000000000001",
        "0000000000000000_0000000000000001\n",
        "\u0660" * 16 + "_" + "\u0660" * 16,  # Arabic-Indic digits are \d, not [0-9]
    ],
)
def test_malformed_offsets(value: str) -> None:
    with pytest.raises(ProtocolError) as excinfo:
        parse_offset(value)
    assert excinfo.value.code is ErrorCode.INVALID_OFFSET
    assert repr(value) in excinfo.value.message


def test_token_beyond_any_kafka_offset() -> None:
    with pytest.raises(ProtocolError) as excinfo:
        parse_offset("0000000000000922_3372036854775808")
    assert excinfo.value.code is ErrorCode.INVALID_OFFSET
    assert "'0000000000000922_3372036854775808'" in excinfo.value.message
