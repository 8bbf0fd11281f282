"""JSON mode: validating bodies, flattening one array level, rendering reads."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.json_mode import render_array, split_append, split_initial

LIMIT = 10_000


@pytest.mark.parametrize(
    ("body", "messages"),
    [
        # Spec §7.1 examples.
        (b'{"event": "created"}', [b'{"event": "created"}']),
        (b'[{"event": "a"}, {"event": "b"}]', [b'{"event": "a"}', b'{"event": "b"}']),
        (b"[[1,2], [3,4]]", [b"[1,2]", b"[3,4]"]),
        (b"[[[1,2,3]]]", [b"[[1,2,3]]"]),
        # The client wraps each append in an array: `append(x)` posts `[x]`.
        (b'[{"message":"hello"}]', [b'{"message":"hello"}']),
        (b"[[1,2,3]]", [b"[1,2,3]"]),
        (b'["string value"]', [b'"string value"']),
        (b"42", [b"42"]),
        (b"true", [b"true"]),
        (b"null", [b"null"]),
        (b'"s"', [b'"s"']),
        (b' \n\t{"a":1}\r\n', [b'{"a":1}']),
        (b"[ 1 ,\n 2\t]", [b"1", b"2"]),
        (b'[{"a": [1, {"b": ","}]}, "]"]', [b'{"a": [1, {"b": ","}]}', b'"]"']),
    ],
)
def test_split_append(body: bytes, messages: list[bytes]) -> None:
    assert split_append(body, LIMIT) == messages


def test_messages_keep_their_source_text() -> None:
    # A round trip through Python objects would give 100.0, 0, Infinity and an unencodable str.
    body = (
        b'[1E2, -0, 1e400, 12345678901234567890, 1.0, "\\ud800", "\xc3\xa9\\u00e9", {"b":1,"a":2}]'
    )
    assert split_append(body, LIMIT) == [
        b"1E2",
        b"-0",
        b"1e400",
        b"12345678901234567890",
        b"1.0",
        b'"\\ud800"',
        b'"\xc3\xa9\\u00e9"',
        b'{"b":1,"a":2}',
    ]


@pytest.mark.parametrize(
    "body",
    [
        b"{ invalid json }",  # JSON Mode: should reject invalid JSON with 400
        b"NaN",
        b"[NaN]",
        b'{"a": Infinity}',
        b"-Infinity",
        b"[1,]",
        b"[1] x",
        b"{} {}",
        b"'a'",
        b"{'a': 1}",
        b'"\x01"',  # raw control character in a string
        b"\xff",
        b'"\xc3"',  # truncated UTF-8
        b"\xef\xbb\xbf[1]",  # byte order mark
        b" ",
        b"[" * 100_000,
    ],
)
def test_invalid_json(body: bytes) -> None:
    for split in (split_append, split_initial):
        with pytest.raises(ProtocolError) as excinfo:
            split(body, LIMIT)
        assert excinfo.value.code is ErrorCode.INVALID_JSON


@pytest.mark.parametrize("body", [b"[]", b" [ ] ", b"[\n]"])
def test_append_of_empty_array(body: bytes) -> None:
    # JSON Mode: should reject POST with empty array body / should reject empty JSON arrays
    with pytest.raises(ProtocolError) as excinfo:
        split_append(body, LIMIT)
    assert excinfo.value.code is ErrorCode.EMPTY_JSON_ARRAY


def test_append_of_nothing() -> None:
    with pytest.raises(ProtocolError) as excinfo:
        split_append(b"", LIMIT)
    assert excinfo.value.code is ErrorCode.EMPTY_BODY


@pytest.mark.parametrize(
    ("body", "messages"),
    [
        (b"", []),
        (b"[]", []),  # JSON Mode: should allow PUT with empty array body
        (b" [ ] ", []),
        (b"[1,2]", [b"1", b"2"]),
        (b'{"a":1}', [b'{"a":1}']),
        (b"[[]]", [b"[]"]),
    ],
)
def test_split_initial(body: bytes, messages: list[bytes]) -> None:
    assert split_initial(body, LIMIT) == messages


@pytest.mark.parametrize(
    ("messages", "body"),
    [
        ([], b"[]"),  # offset=now and empty reads of JSON streams are exactly `[]`
        ([b"1"], b"[1]"),
        ([b'{"a":1}', b"2", b"[3]"], b'[{"a":1},2,[3]]'),
    ],
)
def test_render_array(messages: list[bytes], body: bytes) -> None:
    assert render_array(messages) == body


def test_appends_read_back_as_one_array() -> None:
    # JSON Mode: should handle mixed batching - single values, arrays, and nested arrays
    bodies = [
        b'{"single": 1}',
        b'[[{"batch": 2}, {"batch": 3}]]',
        b'[[["nested", "array"]]]',
        b"42",
    ]
    messages = [message for body in bodies for message in split_append(body, LIMIT)]
    assert json.loads(render_array(messages)) == [
        {"single": 1},
        [{"batch": 2}, {"batch": 3}],
        [["nested", "array"]],
        42,
    ]


@pytest.mark.parametrize("split", [split_append, split_initial])
def test_an_array_of_the_limit_is_split(split: Callable[[bytes, int], list[bytes]]) -> None:
    assert split(b"[0, 1 ,2]", 3) == [b"0", b"1", b"2"]


@pytest.mark.parametrize("split", [split_append, split_initial])
def test_an_array_past_the_limit_is_refused_where_it_passes_it(
    split: Callable[[bytes, int], list[bytes]],
) -> None:
    # What follows the limit's next element is never read: here it is not even JSON, and
    # a bomb of millions of elements costs no more than this.
    body = b"[" + b"0," * 4 + b"0, nonsense"
    with pytest.raises(ProtocolError) as excinfo:
        split(body, 3)
    assert excinfo.value.code is ErrorCode.PAYLOAD_TOO_LARGE
    assert "more than 3 messages" in str(excinfo.value)


def test_a_bad_element_within_the_limit_is_invalid_json() -> None:
    with pytest.raises(ProtocolError) as excinfo:
        split_append(b"[0, x, 0, 0, 0]", 3)
    assert excinfo.value.code is ErrorCode.INVALID_JSON
