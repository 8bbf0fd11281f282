"""The body of a trim: an offset token under `before`, anything else refused precisely."""

from __future__ import annotations

import pytest

from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.offsets import BEGINNING, NOW, encode
from adapter.protocol.trims import TrimAt, parse_trim


def test_before_is_an_offset_token_or_a_sentinel() -> None:
    assert parse_trim(b'{"before": "%s"}' % encode(42).encode()) == 42
    assert parse_trim(b'{"before": "now"}') is NOW
    assert parse_trim(b'{"before": "-1"}') is BEGINNING


def test_at_is_a_time_in_ms_or_rfc_3339() -> None:
    assert parse_trim(b'{"at": 1700000000000}') == TrimAt(1_700_000_000_000)
    assert parse_trim(b'{"at": "2023-11-14T22:13:20Z"}') == TrimAt(1_700_000_000_000)


@pytest.mark.parametrize(
    ("body", "code", "says"),
    [
        (b"", ErrorCode.INVALID_JSON, "trim body"),
        (b"{", ErrorCode.INVALID_JSON, "trim body"),
        (b"\xff", ErrorCode.INVALID_JSON, "trim body"),
        (b"[]", ErrorCode.INVALID_TRIM, '{"before"'),
        (b"{}", ErrorCode.INVALID_TRIM, '{"before"'),
        (b'{"before": "now", "x": 1}', ErrorCode.INVALID_TRIM, '{"before"'),
        (b'{"at": "yesterday"}', ErrorCode.INVALID_TIME, "'yesterday'"),
        (b'{"at": true}', ErrorCode.INVALID_TIME, "RFC 3339"),
        (b'{"at": 1, "before": "now"}', ErrorCode.INVALID_TRIM, '{"at"'),
        (b'{"before": 42}', ErrorCode.INVALID_TRIM, "a string"),
        (b'{"before": "42"}', ErrorCode.INVALID_OFFSET, "'42'"),
    ],
)
def test_other_bodies_are_refused_with_a_precise_code(
    body: bytes, code: ErrorCode, says: str
) -> None:
    with pytest.raises(ProtocolError) as raised:
        parse_trim(body)
    assert raised.value.code is code
    assert says in raised.value.message
