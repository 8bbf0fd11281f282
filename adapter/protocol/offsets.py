"""Offset tokens in the HTTP API, and where a read starts.

A token is the Kafka offset in the stream's partition as 32 decimal digits in two groups of 16,
`HHHHHHHHHHHHHHHH_LLLLLLLLLLLLLLLL` (offset = H * 10**16 + L); `topology.wire` encodes and
decodes it, because Spark and other Kafka readers spell the same positions. Why this shape:
every non-negative 64-bit offset fits, lexicographic order is numeric order (spec §6), a token
can never be one of the sentinels `-1` and `now`, and the shape is the reference server's, so
tokens the conformance suite spells by hand (`0000000000000000_0000000000000000`, the start of
any stream) mean what it expects.
"""

from __future__ import annotations

from enum import Enum
from typing import Final, TypeAlias

from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.model import StreamMeta
from topology.wire import decode_token, encode_token


class Start(Enum):
    """The two sentinel start positions of a read."""

    BEGINNING = "-1"  # also what an absent `offset` parameter means
    NOW = "now"  # the tail: skip everything already written


# Where a read starts: a sentinel, or the exact Kafka offset a token names.
ReadFrom: TypeAlias = Start | int

BEGINNING: Final = Start.BEGINNING
NOW: Final = Start.NOW


def encode(kafka_offset: int) -> str:
    """The token of a Kafka offset (ValueError outside 0..2**63-1)."""
    return encode_token(kafka_offset)


def parse_offset(value: str | None) -> ReadFrom:
    """Where a read starts, from its `offset` query parameter (None when absent).

    Exactly `-1`, `now` or a token; anything else, the empty string included, is
    INVALID_OFFSET. So is a token above 2**63-1, which no Kafka offset can reach.
    """
    if value is None or value == BEGINNING.value:
        return BEGINNING
    if value == NOW.value:
        return NOW
    try:
        return decode_token(value)
    except ValueError as error:
        message = f"offset {value!r} {error}: use -1, now, or a Stream-Next-Offset value"
        raise ProtocolError(ErrorCode.INVALID_OFFSET, message) from None


def resolve_start(meta: StreamMeta, start: ReadFrom) -> int:
    """The Kafka offset a read begins at. Positions before the stream began mean its start."""
    if isinstance(start, Start):
        return meta.history_start if start is BEGINNING else meta.next_offset
    return max(start, meta.history_start)
