"""Offset tokens: how Kafka offsets are spelled on the wire, and where a read starts.

A token is the Kafka offset in the stream's partition as 32 decimal digits in two groups of 16,
`HHHHHHHHHHHHHHHH_LLLLLLLLLLLLLLLL` (offset = H * 10**16 + L). Every non-negative 64-bit offset
fits, lexicographic order is numeric order (spec §6), a token can never be one of the sentinels
`-1` and `now`, and the shape is the reference server's, so tokens the conformance suite spells
by hand (`0000000000000000_0000000000000000`, the start of any stream) mean what it expects.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Final, TypeAlias

from adapter.protocol.errors import ErrorCode, ProtocolError

GROUP_DIGITS: Final = 16
_GROUP: Final = 10**GROUP_DIGITS
MAX_KAFKA_OFFSET: Final = 2**63 - 1  # Kafka offsets are signed 64-bit
_TOKEN: Final = re.compile(r"([0-9]{16})_([0-9]{16})")  # [0-9], not \d: no other digits


class Start(Enum):
    """The two sentinel start positions of a read."""

    BEGINNING = "-1"  # also what an absent `offset` parameter means
    NOW = "now"  # the tail: skip everything already written


# Where a read starts: a sentinel, or the exact Kafka offset a token names.
ReadFrom: TypeAlias = Start | int

BEGINNING: Final = Start.BEGINNING
NOW: Final = Start.NOW


def encode(kafka_offset: int) -> str:
    """The token of a Kafka offset."""
    if not 0 <= kafka_offset <= MAX_KAFKA_OFFSET:
        raise ValueError(f"Kafka offset {kafka_offset} is outside 0..2**63-1")
    high, low = divmod(kafka_offset, _GROUP)
    return f"{high:0{GROUP_DIGITS}d}_{low:0{GROUP_DIGITS}d}"


def parse_offset(value: str | None) -> ReadFrom:
    """Where a read starts, from its `offset` query parameter (None when absent).

    Exactly `-1`, `now` or a token; anything else, the empty string included, is
    INVALID_OFFSET. So is a token above 2**63-1, which no Kafka offset can reach.
    """
    if value is None or value == BEGINNING.value:
        return BEGINNING
    if value == NOW.value:
        return NOW
    match = _TOKEN.fullmatch(value)
    if match is None:
        raise ProtocolError(
            ErrorCode.INVALID_OFFSET,
            f"offset {value!r} is malformed: use -1, now, or a Stream-Next-Offset value",
        )
    kafka_offset = int(match[1]) * _GROUP + int(match[2])
    if kafka_offset > MAX_KAFKA_OFFSET:
        raise ProtocolError(ErrorCode.INVALID_OFFSET, f"offset {value!r} is beyond any offset")
    return kafka_offset
