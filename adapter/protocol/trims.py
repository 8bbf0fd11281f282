"""The body of `POST {stream}/trim`: `{"before": "<offset token>"}`, where the stream's
messages below that offset are removed (`stream_machine.trim` decides what it does).

`before` is a `Stream-Next-Offset` token, `now` (the tail: every message so far) or `-1` (the
beginning: nothing). Any other body is refused with a precise code: not JSON at all is
`invalid_json`, a JSON text of another shape `invalid_trim`, a malformed token
`invalid_offset`.
"""

from __future__ import annotations

import json
from typing import Any

from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.offsets import ReadFrom, parse_offset


def parse_trim(body: bytes) -> ReadFrom:
    """Where a trim body says the stream's messages stop being readable."""
    try:
        document: Any = json.loads(body)
    except (ValueError, UnicodeDecodeError) as error:
        raise ProtocolError(ErrorCode.INVALID_JSON, f"trim body: {error}") from None
    if not isinstance(document, dict) or set(document) != {"before"}:
        raise _invalid(document)
    before = document["before"]
    if not isinstance(before, str):
        raise ProtocolError(ErrorCode.INVALID_TRIM, '"before" must be an offset token (a string)')
    return parse_offset(before)


def _invalid(document: object) -> ProtocolError:
    if isinstance(document, dict) and "at" in document:
        return ProtocolError(
            ErrorCode.INVALID_TRIM, 'a trim is by offset only: {"before": "<offset token>"}'
        )
    return ProtocolError(ErrorCode.INVALID_TRIM, 'a trim body must be {"before": "<offset token>"}')
