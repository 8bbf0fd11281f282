"""JSON mode (spec §7.1): validating a body, splitting it into messages, rendering a read.

Each message is kept as its exact source text: the value's bytes as the client sent them,
without the surrounding whitespace. We do not re-serialise (`json.dumps` of `json.loads`),
because the conformance suite only compares parsed values (no test reads JSON bytes back,
apart from `[]` for an empty read), while a round trip through Python objects would alter or
break valid input: `1E2` becomes `100.0`, `-0` becomes `0`, `1e400` becomes `Infinity` (which
is not JSON), and an escaped lone surrogate such as `"\\ud800"` cannot be encoded as UTF-8.
Source text keeps numbers, escapes and key order exactly, so a read is byte-stable.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final

from adapter.protocol.errors import ErrorCode, ProtocolError

_WHITESPACE: Final = " \t\n\r"  # RFC 8259 whitespace; str.strip() would take more


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


# Python's decoder accepts NaN, Infinity and -Infinity by default: they are not JSON.
_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)


def split_append(body: bytes) -> list[bytes]:
    """The messages of a POST body: the elements of a top-level array, or the one value.

    An empty array is EMPTY_JSON_ARRAY, an empty body EMPTY_BODY, anything that is not
    exactly one JSON text (in UTF-8) INVALID_JSON.
    """
    if not body:
        raise ProtocolError(ErrorCode.EMPTY_BODY, "a JSON append needs a body")
    messages = _split(body)
    if not messages:
        raise ProtocolError(ErrorCode.EMPTY_JSON_ARRAY, "an empty JSON array appends nothing")
    return messages


def split_initial(body: bytes) -> list[bytes]:
    """The messages of a PUT body: as for an append, but `[]` or no body means none."""
    return _split(body) if body else []


def render_array(messages: Sequence[bytes]) -> bytes:
    """A read's body: the messages as one JSON array (`[]` when there are none)."""
    return b"[" + b",".join(messages) + b"]"


def _split(body: bytes) -> list[bytes]:
    text = _text(body)
    value = _parse(text)
    if isinstance(value, list):
        return [element.encode() for element in _elements(text, len(value))]
    return [text.strip(_WHITESPACE).encode()]


def _text(body: bytes) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ProtocolError(
            ErrorCode.INVALID_JSON, f"body is not UTF-8 (byte {error.start})"
        ) from None


def _parse(text: str) -> object:
    try:
        return _DECODER.decode(text)
    except ValueError as error:  # JSONDecodeError is a ValueError, as is a rejected NaN
        raise ProtocolError(ErrorCode.INVALID_JSON, f"body is not valid JSON: {error}") from None
    except RecursionError:
        raise ProtocolError(ErrorCode.INVALID_JSON, "body JSON is nested too deeply") from None


def _elements(text: str, count: int) -> list[str]:
    """The source text of each element of the (already validated) top-level array."""
    position = _skip(text, text.index("[") + 1)
    elements = []
    for _ in range(count):
        _, end = _DECODER.raw_decode(text, position)
        elements.append(text[position:end])
        position = _skip(text, _skip(text, end) + 1)  # past the ',' (or the closing ']')
    return elements


def _skip(text: str, position: int) -> int:
    while position < len(text) and text[position] in _WHITESPACE:
        position += 1
    return position
