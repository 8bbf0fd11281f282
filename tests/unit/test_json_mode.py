"""JSON mode: validating bodies, flattening one array level, rendering reads."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapter.protocol import json_mode
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.json_bodies import TOO_DEEP
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


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=40,
)


@given(
    value=JSON_VALUES,
    window=st.integers(1, 9),
    separators=st.sampled_from([(",", ":"), (", ", ": "), (" ,\n", " :\t")]),
)
def test_a_body_split_in_windows_is_split_as_if_whole(
    value: object, window: int, separators: tuple[str, str]
) -> None:
    """Windows of a few characters cut every token somewhere: the walk still finds each
    message's source text, as one parse of the whole body does."""
    dumps = functools.partial(json.dumps, separators=separators, ensure_ascii=False)
    body = dumps(value).encode()
    elements = value if isinstance(value, list) else [value]
    expected = [dumps(element).encode() for element in elements]
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(json_mode, "STEP_CHARS", window)
        assert json_mode.split_initial(body, LIMIT) == expected


@pytest.mark.parametrize(
    "body",
    [b'{"a": [1, 2,]}', b"[[1,]]", b'{"a" 1}', b'{"a": 1 "b": 2}', b"[1, 2", b'{"a": [}'],
)
def test_invalid_json_in_windows_is_invalid(monkeypatch: pytest.MonkeyPatch, body: bytes) -> None:
    monkeypatch.setattr(json_mode, "STEP_CHARS", 3)
    with pytest.raises(ProtocolError) as refused:
        json_mode.split_append(body, LIMIT)
    assert refused.value.code is ErrorCode.INVALID_JSON


def _steps(body: bytes) -> tuple[int, list[bytes]]:
    """How many steps splitting `body` takes, and its messages."""
    steps = json_mode.split_steps(body, LIMIT)
    taken = 0
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return taken, done.value
        taken += 1


def test_one_large_value_is_parsed_a_window_at_a_time() -> None:
    """An object of 200,000 keys (2.6 MiB): one parse of it held the event loop for a third of
    a second; the walk takes it in steps of at most a window of text each."""
    body = json.dumps({f"k{n}": n for n in range(200_000)}).encode()
    steps, messages = _steps(body)
    assert messages == [body]
    assert steps >= len(body) // json_mode.STEP_CHARS


def test_a_value_nested_past_the_walks_depth_is_invalid_in_bounded_steps() -> None:
    body = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(ProtocolError) as refused:
        _steps(b"[1, " + body + b"]")
    assert refused.value.code is ErrorCode.INVALID_JSON
    assert TOO_DEEP in refused.value.message
