"""The body of `POST {stream}/trim`: `{"before": "<offset token>"}`, where the stream's
messages below that offset are removed (`stream_machine.trim` decides what it does), or
`{"at": <ms since the epoch or RFC 3339 time>}`: below the first message appended at or after
that moment (found as a read by time finds it, `service/moments.py`).

`before` is a `Stream-Next-Offset` token, `now` (the tail: every message so far) or `-1` (the
beginning: nothing). Any other body is refused with a precise code: not JSON at all is
`invalid_json`, a JSON text of another shape `invalid_trim`, a malformed token
`invalid_offset`, a malformed time `invalid_time`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.offsets import ReadFrom, parse_offset
from adapter.protocol.read_options import parse_moment


@dataclass(frozen=True)
class TrimAt:
    """A trim by time: below the first message appended at or after `at_ms`."""

    at_ms: int


def parse_trim(body: bytes) -> ReadFrom | TrimAt:
    """Where a trim body says the stream's messages stop being readable."""
    try:
        document: Any = json.loads(body)
    except (ValueError, UnicodeDecodeError) as error:
        raise ProtocolError(ErrorCode.INVALID_JSON, f"trim body: {error}") from None
    if isinstance(document, dict) and set(document) == {"at"}:
        at = document["at"]
        if isinstance(at, bool) or not isinstance(at, int | str):
            raise ProtocolError(ErrorCode.INVALID_TIME, '"at" must be ms or an RFC 3339 time')
        return TrimAt(parse_moment(str(at)))
    if not isinstance(document, dict) or set(document) != {"before"}:
        raise ProtocolError(ErrorCode.INVALID_TRIM, _SHAPE)
    before = document["before"]
    if not isinstance(before, str):
        raise ProtocolError(ErrorCode.INVALID_TRIM, '"before" must be an offset token (a string)')
    return parse_offset(before)


_SHAPE = 'a trim body must be {"before": "<offset token>"} or {"at": <time>}'
