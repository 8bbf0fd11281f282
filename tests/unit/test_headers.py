"""Strict parsing of the protocol's request headers."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.headers import (
    MAX_SAFE_INTEGER,
    Expiry,
    content_types_match,
    format_expires_at,
    is_json,
    is_text_like,
    is_true,
    media_type,
    normalize_content_type,
    parse_expires_at,
    parse_expiry,
    parse_fencing_token,
    parse_producer,
    parse_stream_seq,
    parse_ttl,
    seq_is_greater,
)
from topology.wire import ProducerStamp

FIRST_MS = -62_135_596_800_000  # 0001-01-01T00:00:00Z
LAST_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z


def _ms(year: int, month: int, day: int, hour: int, minute: int, second: int) -> int:
    return int(datetime(year, month, day, hour, minute, second, tzinfo=UTC).timestamp()) * 1000


def _invalid_header(excinfo: pytest.ExceptionInfo[ProtocolError], header: str) -> None:
    assert excinfo.value.code is ErrorCode.INVALID_HEADER
    assert header in excinfo.value.message


@pytest.mark.parametrize(("value", "expected"), [("true", True), ("TRUE", True), ("True", True)])
def test_stream_closed_true_in_any_case(value: str, expected: bool) -> None:
    assert is_true(value) is expected


@pytest.mark.parametrize("value", [None, "", "false", "yes", "1", "on", " true", "truE!", "trUe\0"])
def test_stream_closed_other_values_are_absent(value: str | None) -> None:
    assert is_true(value) is False


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, None), ("0", 0), ("1", 1), ("3600", 3600), (str(MAX_SAFE_INTEGER), MAX_SAFE_INTEGER)],
)
def test_ttl(value: str | None, expected: int | None) -> None:
    assert parse_ttl(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        "abc",  # TTL and Expiry Validation: should reject invalid TTL (non-integer)
        "-1",  # should reject negative TTL
        "00060",  # TTL and Expiry Edge Cases: should reject TTL with leading zeros
        "+60",  # should reject TTL with plus sign
        "60.5",  # should reject TTL with float value
        "1e3",  # should reject TTL with scientific notation
        "3600.0",
        "03600",
        "00",
        "",
        " 60",
        "60 ",
        "\u0663",
        str(MAX_SAFE_INTEGER + 1),
        "9" * 5000,
    ],
)
def test_invalid_ttl(value: str) -> None:
    with pytest.raises(ProtocolError) as excinfo:
        parse_ttl(value)
    _invalid_header(excinfo, "Stream-TTL")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("2030-01-02T03:04:05Z", _ms(2030, 1, 2, 3, 4, 5)),
        ("2030-01-02T03:04:05.678Z", _ms(2030, 1, 2, 3, 4, 5) + 678),  # Date.toISOString()
        ("2030-01-02T03:04:05.678+00:00", _ms(2030, 1, 2, 3, 4, 5) + 678),  # with offset
        ("2030-01-02T03:04:05.5Z", _ms(2030, 1, 2, 3, 4, 5) + 500),
        ("2030-01-02T03:04:05.123999999Z", _ms(2030, 1, 2, 3, 4, 5) + 123),
        ("2030-01-02T05:04:05+02:00", _ms(2030, 1, 2, 3, 4, 5)),
        ("2030-01-01T23:04:05-04:00", _ms(2030, 1, 2, 3, 4, 5)),
        ("2030-01-02T03:04:05-00:00", _ms(2030, 1, 2, 3, 4, 5)),
        ("2030-01-02t03:04:05z", _ms(2030, 1, 2, 3, 4, 5)),
        ("2016-12-31T23:59:60Z", _ms(2017, 1, 1, 0, 0, 0)),
        ("1970-01-01T00:00:00Z", 0),
        ("1969-12-31T23:59:59.999Z", -1),
        ("9999-12-31T23:59:59.999Z", LAST_MS),  # the last instant of year 9999 in UTC
        ("9999-12-31T23:59:59.999+00:00", LAST_MS),
        ("9999-12-31T23:59:59.999-00:00", LAST_MS),
        ("0001-01-01T00:00:00Z", FIRST_MS),
        ("0001-01-01T23:59:00+23:59", FIRST_MS),
        ("9999-12-31T00:00:59.999-23:59", LAST_MS),
    ],
)
def test_expires_at(value: str | None, expected: int | None) -> None:
    assert parse_expires_at(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        "not-a-timestamp",  # TTL and Expiry Edge Cases: should reject invalid Expires-At timestamp
        "",
        "2030-01-02",
        "2030-01-02T03:04:05",  # no offset
        "2030-01-02 03:04:05Z",
        "2030-01-02T03:04Z",
        "2030-1-02T03:04:05Z",
        "2030-01-02T03:04:05.Z",
        "2030-01-02T03:04:05+0200",
        "2030-01-02T03:04:05+02",
        "2030-13-02T03:04:05Z",
        "2030-02-30T03:04:05Z",
        "2030-01-02T24:00:00Z",
        "2030-01-02T03:60:05Z",
        "2030-01-02T03:04:61Z",
        "2030-01-02T03:04:05+24:00",
        "2030-01-02T03:04:05+02:60",
        "0000-01-01T00:00:00Z",
        "9999-12-31T23:59:60Z",
        "9999-12-31T23:59:59-23:59",  # year 10000 in UTC
        "9999-12-31T00:01:00-23:59",
        "0001-01-01T00:00:00+23:59",  # year 0 in UTC
        "0001-01-01T00:00:00.999+00:01",
        " 2030-01-02T03:04:05Z",
        "2030-01-02T03:04:05Z\n",
        "1735689600000",
        "Thu, 02 Jan 2030 03:04:05 GMT",
    ],
)
def test_invalid_expires_at(value: str) -> None:
    with pytest.raises(ProtocolError) as excinfo:
        parse_expires_at(value)
    _invalid_header(excinfo, "Stream-Expires-At")


@pytest.mark.parametrize(
    ("ttl", "expires_at", "expected"),
    [
        (None, None, Expiry(None, None)),
        ("60", None, Expiry(60, None)),
        (None, "1970-01-01T00:00:01Z", Expiry(None, 1000)),
    ],
)
def test_expiry(ttl: str | None, expires_at: str | None, expected: Expiry) -> None:
    assert parse_expiry(ttl, expires_at) == expected


def test_expiry_refuses_both() -> None:
    # TTL and Expiry Validation: should reject both TTL and Expires-At (400)
    with pytest.raises(ProtocolError) as excinfo:
        parse_expiry("3600", "2030-01-02T03:04:05Z")
    _invalid_header(excinfo, "not both")


def test_expiry_checks_each_value() -> None:
    with pytest.raises(ProtocolError) as excinfo:
        parse_expiry("1e3", None)
    _invalid_header(excinfo, "Stream-TTL")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("", None),
        ("  ", None),
        ("text/plain", "text/plain"),
        ("TEXT/PLAIN", "text/plain"),
        ("APPLICATION/JSON", "application/json"),
        ("application/json; charset=utf-8", "application/json; charset=utf-8"),
        ("text/plain;charset=UTF-8", "text/plain; charset=UTF-8"),  # what fetch() sends
        (" text/plain ; Charset = UTF-8 ", "text/plain; charset=UTF-8"),
        ("text/plain;", "text/plain"),
        ('text/plain; x="a;b\\"c"', 'text/plain; x="a;b\\"c"'),
        ("application/vnd.api+json", "application/vnd.api+json"),
    ],
)
def test_normalize_content_type(value: str | None, expected: str | None) -> None:
    assert normalize_content_type(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        "text",
        "text/",
        "/plain",
        "text/plain/x",
        "text plain",
        "text/plain; charset",
        'a/b; x="open',
    ],
)
def test_malformed_content_type(value: str) -> None:
    with pytest.raises(ProtocolError) as excinfo:
        normalize_content_type(value)
    _invalid_header(excinfo, "Content-Type")


@pytest.mark.parametrize(
    ("stream_ct", "request_ct", "match"),
    [
        ("text/plain", "text/plain", True),
        ("text/plain", "TEXT/PLAIN", True),  # should treat content-type case-insensitively
        ("application/json", "APPLICATION/JSON", True),
        # JSON Mode: should handle content-type with charset parameter
        ("application/json; charset=utf-8", "application/json; charset=utf-8", True),
        ("application/json; charset=utf-8", "application/json", True),
        ("text/plain", "text/plain;charset=UTF-8", True),
        ("text/plain", "application/json", False),  # should return 409 on content-type mismatch
        ("application/json", "application/vnd.api+json", False),
        ("application/octet-stream", "application/x-protobuf", False),
    ],
)
def test_content_types_match(stream_ct: str, request_ct: str, match: bool) -> None:
    assert content_types_match(stream_ct, request_ct) is match


@pytest.mark.parametrize(
    ("content_type", "json", "text"),
    [
        ("application/json", True, True),
        ("Application/JSON; charset=utf-8", True, True),
        ("application/vnd.api+json", False, False),
        ("application/ndjson", False, False),
        ("text/plain", False, True),
        ("text/event-stream", False, True),
        ("TEXT/HTML; charset=utf-8", False, True),
        ("application/octet-stream", False, False),
        ("image/png", False, False),
        ("application/x-protobuf", False, False),
    ],
)
def test_json_and_text_like(content_type: str, json: bool, text: bool) -> None:
    assert is_json(content_type) is json
    assert is_text_like(content_type) is text


def test_media_type() -> None:
    assert media_type(" Text/Plain ; charset=UTF-8") == "text/plain"


@pytest.mark.parametrize("value", [None, "001", "app-seq-001", "ü", "\udcff"])
def test_stream_seq(value: str | None) -> None:
    assert parse_stream_seq(value) == value


@pytest.mark.parametrize("value", ["", "\ud800"])
def test_invalid_stream_seq(value: str) -> None:
    with pytest.raises(ProtocolError) as excinfo:
        parse_stream_seq(value)
    _invalid_header(excinfo, "Stream-Seq")


@pytest.mark.parametrize(
    ("new", "last", "greater"),
    [
        ("001", None, True),
        ("002", "001", True),
        ("001", "002", False),  # HTTP Protocol: should enforce sequence ordering
        ("001", "001", False),  # should reject duplicate seq values
        ("10", "2", False),  # should enforce lexicographic seq ordering ("2" then "10" rejects)
        ("10", "09", True),  # should allow lexicographic seq ordering ("09" then "10" succeeds)
        ("B", "a", False),  # Protocol Edge Cases: should enforce case-sensitive seq ordering
        ("a", "B", True),
        ("ab", "a", True),
        ("\uffff", "\U00010000", False),  # UTF-8 bytes, not UTF-16 code units
        ("\udcff", "\udcfe", True),  # raw header bytes 0xFF > 0xFE
    ],
)
def test_seq_is_greater(new: str, last: str | None, greater: bool) -> None:
    assert seq_is_greater(new, last) is greater


@pytest.mark.parametrize(
    ("pid", "epoch", "seq", "expected"),
    [
        (None, None, None, None),
        ("test-producer", "0", "0", ProducerStamp("test-producer", 0, 0)),
        ("p", "1", "5", ProducerStamp("p", 1, 5)),
        ("p", "007", "00", ProducerStamp("p", 7, 0)),
        ("p", str(MAX_SAFE_INTEGER), "0" * 20 + "1", ProducerStamp("p", MAX_SAFE_INTEGER, 1)),
    ],
)
def test_producer(
    pid: str | None, epoch: str | None, seq: str | None, expected: ProducerStamp | None
) -> None:
    assert parse_producer(pid, epoch, seq) == expected


@pytest.mark.parametrize(
    ("pid", "epoch", "seq", "named"),
    [
        # Idempotent Producer Operations: should require all producer headers together
        ("p", None, None, "together"),
        (None, "0", None, "together"),
        ("p", "0", None, "together"),
        (None, "0", "0", "together"),
        ("", None, None, "together"),
        ("", "0", "0", "Producer-Id"),  # should reject empty Producer-Id
        (
            "\udcff\udcfe",
            "0",
            "0",
            "Producer-Id",
        ),  # bytes that are not UTF-8, as aiohttp decodes them
        # should reject invalid integer formats in producer headers
        ("p", "0", "1abc", "Producer-Seq"),
        ("p", "0xyz", "0", "Producer-Epoch"),
        ("p", "1e3", "0", "Producer-Epoch"),
        ("p", "-1", "0", "Producer-Epoch"),
        ("p", "0", "+1", "Producer-Seq"),
        ("p", "0", "1.0", "Producer-Seq"),
        ("p", "", "0", "Producer-Epoch"),
        ("p", "0", " 1", "Producer-Seq"),
        ("p", "\u0663", "0", "Producer-Epoch"),
        ("p", str(MAX_SAFE_INTEGER + 1), "0", "Producer-Epoch"),
        ("p", "0", "9" * 5000, "Producer-Seq"),
    ],
)
def test_invalid_producer(pid: str | None, epoch: str | None, seq: str | None, named: str) -> None:
    with pytest.raises(ProtocolError) as excinfo:
        parse_producer(pid, epoch, seq)
    _invalid_header(excinfo, named)


@pytest.mark.parametrize(
    ("expires_at_ms", "expected"),
    [
        (0, "1970-01-01T00:00:00.000Z"),
        (-1, "1969-12-31T23:59:59.999Z"),
        (1_893_553_445_678, "2030-01-02T03:04:05.678Z"),
        (LAST_MS, "9999-12-31T23:59:59.999Z"),
        (FIRST_MS, "0001-01-01T00:00:00.000Z"),
    ],
)
def test_format_expires_at(expires_at_ms: int, expected: str) -> None:
    assert format_expires_at(expires_at_ms) == expected
    assert parse_expires_at(expected) == expires_at_ms


@pytest.mark.parametrize(
    ("stored", "expected"),
    [
        (LAST_MS + 1, "9999-12-31T23:59:59.999Z"),
        (253_402_387_139_000, "9999-12-31T23:59:59.999Z"),  # ...23:59:59-23:59, once stored
        (2**63 - 1, "9999-12-31T23:59:59.999Z"),
        (FIRST_MS - 1, "0001-01-01T00:00:00.000Z"),
        (-(2**63), "0001-01-01T00:00:00.000Z"),
    ],
)
def test_format_expires_at_never_raises_for_a_stored_value(stored: int, expected: str) -> None:
    assert format_expires_at(stored) == expected


@pytest.mark.parametrize("value", [None, "t", "writer-7:epoch/3", "x" * 64])
def test_fencing_token(value: str | None) -> None:
    assert parse_fencing_token(value) == value


@pytest.mark.parametrize("value", ["", "x" * 65, "two words", "caf\u00e9"])
def test_invalid_fencing_token(value: str) -> None:
    with pytest.raises(ProtocolError) as raised:
        parse_fencing_token(value)
    assert raised.value.code is ErrorCode.INVALID_HEADER
