"""JSON mode (spec §7.1): validating a body, splitting it into messages, rendering a read.

Each message is kept as its exact source text: the value's bytes as the client sent them,
without the surrounding whitespace. We do not re-serialise (`json.dumps` of `json.loads`),
because the conformance suite only compares parsed values (no test reads JSON bytes back,
apart from `[]` for an empty read), while a round trip through Python objects would alter or
break valid input: `1E2` becomes `100.0`, `-0` becomes `0`, `1e400` becomes `Infinity` (which
is not JSON), and an escaped lone surrogate such as `"\\ud800"` cannot be encoded as UTF-8.
Source text keeps numbers, escapes and key order exactly, so a read is byte-stable.

A top-level array is split element by element, counted as it goes: past `limit` elements the
body is refused (413) without reading further. Parsed whole first, an 8 KiB gzip body of 4
million zeros held the event loop 2.2 s and ~120 MB before its 413.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.json_bodies import DECODER, TOO_DEEP, invalid

_WHITESPACE: Final = " \t\n\r"  # RFC 8259 whitespace; str.strip() would take more


def split_append(body: bytes, limit: int) -> list[bytes]:
    """The messages of a POST body: the elements of a top-level array (at most `limit`), or
    the one value.

    An empty array is EMPTY_JSON_ARRAY, an empty body EMPTY_BODY, anything that is not
    exactly one JSON text (in UTF-8) INVALID_JSON, more than `limit` elements
    PAYLOAD_TOO_LARGE.
    """
    if not body:
        raise ProtocolError(ErrorCode.EMPTY_BODY, "a JSON append needs a body")
    messages = _split(body, limit)
    if not messages:
        raise ProtocolError(ErrorCode.EMPTY_JSON_ARRAY, "an empty JSON array appends nothing")
    return messages


def split_initial(body: bytes, limit: int) -> list[bytes]:
    """The messages of a PUT body: as for an append, but `[]` or no body means none."""
    return _split(body, limit) if body else []


def render_array(messages: Sequence[bytes]) -> bytes:
    """A read's body: the messages as one JSON array (`[]` when there are none)."""
    return b"[" + b",".join(messages) + b"]"


def _split(body: bytes, limit: int) -> list[bytes]:
    text = _text(body)
    start = _skip(text, 0)
    if text.startswith("[", start):
        return [element.encode() for element in _elements(text, start + 1, limit)]
    _decode_end(text, _decode(text, start))  # one value, whole
    return [text.strip(_WHITESPACE).encode()]


def _text(body: bytes) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise invalid(f"body is not UTF-8 (byte {error.start})") from None


def _elements(text: str, position: int, limit: int) -> list[str]:
    """The source text of each element of the array opened before `position`, the array
    being all that `text` holds but whitespace."""
    elements: list[str] = []
    position = _skip(text, position)
    closed = text.startswith("]", position)
    while not closed:
        if len(elements) == limit:
            raise ProtocolError(
                ErrorCode.PAYLOAD_TOO_LARGE,
                f"a JSON array of more than {limit} messages; at most {limit} are written "
                "by one request",
            )
        end = _decode(text, position)
        elements.append(text[position:end])
        position = _skip(text, end)
        closed = text.startswith("]", position)
        if not closed:
            if not text.startswith(",", position):
                raise invalid(f"body is not valid JSON: ',' or ']' expected (char {position})")
            position = _skip(text, position + 1)
    _decode_end(text, position + 1)  # past the ']'
    return elements


def _decode(text: str, position: int) -> int:
    """Where the JSON value starting at `position` ends."""
    try:
        _, end = DECODER.raw_decode(text, position)
    except ValueError as error:  # JSONDecodeError is a ValueError, as is a rejected NaN
        raise invalid(f"body is not valid JSON: {error}") from None
    except RecursionError:
        raise invalid(f"body JSON is {TOO_DEEP}") from None
    return end


def _decode_end(text: str, position: int) -> None:
    """Nothing but whitespace may follow the body's one value."""
    if _skip(text, position) != len(text):
        raise invalid(f"body is not valid JSON: extra data (char {position})")


def _skip(text: str, position: int) -> int:
    while position < len(text) and text[position] in _WHITESPACE:
        position += 1
    return position
