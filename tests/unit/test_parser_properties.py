"""Properties of the parsers that take client input, over generated input (Hypothesis).

Each parser either returns a value that round-trips or refuses with a `ProtocolError`: no
other exception (a 500) for any input, and one spelling per value where the protocol says so.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import unquote_to_bytes

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapter.http.observe import request_id
from adapter.http.request_checks import require_utf8_path, require_utf8_query
from adapter.protocol import json_mode
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.headers import (
    format_expires_at,
    normalize_content_type,
    parse_expires_at,
    parse_expiry,
    parse_producer,
    parse_stream_seq,
)
from adapter.protocol.offsets import BEGINNING, NOW, encode, parse_offset
from adapter.protocol.sse import event

# Header text as aiohttp hands it over: latin-1 and surrogate-escaped bytes included.
header_text = st.text(st.characters(codec="utf-8") | st.sampled_from("\udcff\udc80\x00\r"))
offsets = st.integers(min_value=0, max_value=2**63 - 1)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)


T = TypeVar("T")


def _outcome(parse: Callable[[], T]) -> T | ErrorCode:
    """What parsing returned, or the code of the `ProtocolError` it refused with."""
    try:
        return parse()
    except ProtocolError as error:
        return error.code


@given(offsets)
def test_an_offset_token_round_trips(offset: int) -> None:
    assert parse_offset(encode(offset)) == offset


@given(st.text())
def test_an_offset_parses_to_one_spelling_or_is_refused(value: str) -> None:
    parsed = _outcome(lambda: parse_offset(value))
    if parsed is ErrorCode.INVALID_OFFSET:
        return
    if parsed is BEGINNING:
        assert value == "-1"
    elif parsed is NOW:
        assert value == "now"
    else:
        assert isinstance(parsed, int)
        assert encode(parsed) == value  # no second token for one offset


@given(header_text, header_text, header_text)
def test_producer_headers_parse_or_are_refused(pid: str, epoch: str, seq: str) -> None:
    parsed = _outcome(lambda: parse_producer(pid, epoch, seq))
    if parsed is ErrorCode.INVALID_HEADER:
        return
    assert parsed is not None
    assert not isinstance(parsed, ErrorCode)
    assert parsed.producer_id.encode()  # valid UTF-8, never empty
    assert str(parsed.epoch).isdigit()
    assert str(parsed.seq).isdigit()


@given(header_text)
def test_content_type_and_stream_seq_parse_or_are_refused(value: str) -> None:
    for parse in (normalize_content_type, parse_stream_seq):
        parsed = _outcome(lambda parse=parse: parse(value))  # type: ignore[misc]
        assert parsed is ErrorCode.INVALID_HEADER or parsed is None or isinstance(parsed, str)


@given(st.none() | header_text, st.none() | header_text)
def test_expiry_parses_or_is_refused(ttl: str | None, expires_at: str | None) -> None:
    parsed = _outcome(lambda: parse_expiry(ttl, expires_at))
    assert not isinstance(parsed, ErrorCode) or parsed is ErrorCode.INVALID_HEADER


@given(st.integers(min_value=-62135596800000, max_value=253402300799999))
def test_an_expiry_round_trips(expires_at_ms: int) -> None:
    assert parse_expires_at(format_expires_at(expires_at_ms)) == expires_at_ms


def _read_sse(frame: bytes) -> tuple[str, str]:
    """An SSE reader (WHATWG §9.2.6) for one event: its name and its data."""
    text = frame.decode()
    assert text.endswith("\n\n")
    lines = text[:-2].split("\n")
    assert "" not in lines  # one event: no blank line before its end
    name, data = "", []
    for line in lines:
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            name = value
        else:
            assert field == "data"
            data.append(value)
    return name, "\n".join(data)


@given(st.text())
def test_an_sse_event_carries_any_text_as_one_event(text: str) -> None:
    name, data = _read_sse(event("data", text))
    assert name == "data"
    assert data == text.replace("\r\n", "\n").replace("\r", "\n")


@given(st.lists(json_values, min_size=1, max_size=6))
def test_a_json_array_splits_into_its_elements_and_renders_back(values: list[Any]) -> None:
    body = json.dumps(values, indent=1).encode()
    messages = json_mode.split_append(body, 10)
    assert [json.loads(message) for message in messages] == values
    assert json.loads(json_mode.render_array(messages)) == values


@given(json_values.filter(lambda value: not isinstance(value, list)))
def test_a_json_value_is_one_message(value: Any) -> None:
    (message,) = json_mode.split_append(f" {json.dumps(value)}\n".encode(), 1)
    assert json.loads(message) == value


@given(st.binary())
def test_any_body_splits_or_is_refused(body: bytes) -> None:
    messages = _outcome(lambda: json_mode.split_append(body, 10))
    if isinstance(messages, ErrorCode):
        assert messages in (
            ErrorCode.INVALID_JSON,
            ErrorCode.EMPTY_BODY,
            ErrorCode.EMPTY_JSON_ARRAY,
            ErrorCode.PAYLOAD_TOO_LARGE,
        )
        return
    for message in messages:
        json.loads(message)


@given(st.text())
def test_a_path_is_utf8_or_refused(path: str) -> None:
    assert _outcome(lambda: require_utf8_path(path)) in (None, ErrorCode.BAD_REQUEST)


@given(st.text() | st.binary().map(lambda raw: "".join(f"%{byte:02x}" for byte in raw)))
def test_a_query_is_utf8_once_decoded_or_refused(query: str) -> None:
    outcome = _outcome(lambda: require_utf8_query(query))
    assert outcome in (None, ErrorCode.INVALID_QUERY)
    try:
        unquote_to_bytes(query).decode()
    except UnicodeError:
        assert outcome is ErrorCode.INVALID_QUERY
    else:
        assert outcome is None


@pytest.mark.parametrize("query", ["after=%ff", "prefix=%ed%a0%80", "a=%c0%af", "p=\udcff"])
def test_a_query_not_utf8_once_decoded_is_invalid(query: str) -> None:
    assert _outcome(lambda: require_utf8_query(query)) is ErrorCode.INVALID_QUERY


@given(st.none() | header_text)
def test_a_request_id_is_always_a_short_header_token(given_id: str | None) -> None:
    made = request_id(given_id)
    assert 1 <= len(made) <= 128
    assert made.isascii()
    assert made.isprintable()
    assert " " not in made
