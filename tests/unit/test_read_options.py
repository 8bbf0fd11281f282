"""The read extensions' query parameters: `at` and the bounds `max_bytes`/`max_messages`."""

from __future__ import annotations

import pytest

from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.read_options import Bounds, parse_at, parse_bounds


@pytest.mark.parametrize(
    ("value", "ms"),
    [
        ("0", 0),
        ("1700000000123", 1_700_000_000_123),
        ("9007199254740991", 2**53 - 1),
        ("2023-11-14T22:13:20Z", 1_700_000_000_000),
        ("2023-11-14T22:13:20.123456z", 1_700_000_000_123),
        ("2023-11-15T00:13:20+02:00", 1_700_000_000_000),
        ("1969-12-31T23:59:59Z", 0),  # before every record: the epoch
    ],
)
def test_at_is_milliseconds_or_an_rfc3339_time(value: str, ms: int) -> None:
    assert parse_at({"at": value}) == ms


def test_no_at_is_none() -> None:
    assert parse_at({"offset": "-1"}) is None


@pytest.mark.parametrize(
    "value",
    ["yesterday", "", "-1", "01", "1.5", "9007199254740992", "2023-11-14", "2023-02-30T00:00:00Z"],
)
def test_a_bad_at_is_invalid_time(value: str) -> None:
    with pytest.raises(ProtocolError) as raised:
        parse_at({"at": value})
    assert raised.value.code is ErrorCode.INVALID_TIME
    assert repr(value) in raised.value.message


def test_at_with_an_offset_is_refused() -> None:
    with pytest.raises(ProtocolError) as raised:
        parse_at({"at": "0", "offset": "-1"})
    assert raised.value.code is ErrorCode.INVALID_QUERY


def test_bounds_are_whole_positive_numbers() -> None:
    assert parse_bounds({}) == Bounds()
    assert not parse_bounds({}).bounded
    assert parse_bounds({"max_bytes": "10", "max_messages": "2"}) == Bounds(10, 2)
    assert parse_bounds({"max_messages": "1"}).bounded


@pytest.mark.parametrize("value", ["0", "-1", "", "1e3", " 5", "07", "9007199254740992", "x"])
@pytest.mark.parametrize("name", ["max_bytes", "max_messages"])
def test_a_bad_bound_is_invalid_query(name: str, value: str) -> None:
    with pytest.raises(ProtocolError) as raised:
        parse_bounds({name: value})
    assert raised.value.code is ErrorCode.INVALID_QUERY
    assert name in raised.value.message


def test_reached_when_either_bound_is() -> None:
    assert Bounds(max_bytes=10).reached(10, 1)
    assert not Bounds(max_bytes=10).reached(9, 5)
    assert Bounds(max_messages=2).reached(0, 2)
    assert not Bounds().reached(10**9, 10**9)
