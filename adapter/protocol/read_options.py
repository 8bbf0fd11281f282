"""The read extensions' query parameters: `at` (a read by time) and `max_bytes`/`max_messages`
(a bounded read), parsed strictly into typed values.

`at` names a moment, as milliseconds since the epoch or an RFC 3339 date-time; the read starts
at the stream's first message appended at or after it, and a read may name a moment or an
offset, never both. The bounds cap a catch-up or long-poll answer in whole messages: it is cut
before the message that would pass either, but always holds one message when there is one, so
a message larger than `max_bytes` still comes, whole and alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.headers import MAX_SAFE_INTEGER, rfc3339_ms

_COUNT: Final = re.compile(r"[1-9][0-9]{0,15}")
_MILLIS: Final = re.compile(r"0|[1-9][0-9]{0,15}")


@dataclass(frozen=True)
class Bounds:
    """At most this many bytes of messages and this many messages (None: no own bound)."""

    max_bytes: int | None = None
    max_messages: int | None = None

    @property
    def bounded(self) -> bool:
        return self.max_bytes is not None or self.max_messages is not None

    def reached(self, size: int, count: int) -> bool:
        """Whether an answer of `count` messages and `size` bytes may take no more."""
        full_bytes = self.max_bytes is not None and size >= self.max_bytes
        return full_bytes or (self.max_messages is not None and count >= self.max_messages)


UNBOUNDED: Final = Bounds()


def parse_at(query: Mapping[str, str]) -> int | None:
    """The moment `at` names, in ms since the epoch (None when absent). INVALID_TIME unless it
    is a count of milliseconds or an RFC 3339 date-time; INVALID_QUERY beside `offset`."""
    value = query.get("at")
    if value is None:
        return None
    if "offset" in query:
        raise ProtocolError(ErrorCode.INVALID_QUERY, "give either offset or at, not both")
    return parse_moment(value)


def parse_moment(value: str) -> int:
    """A moment in ms since the epoch, from a count of milliseconds or an RFC 3339 date-time;
    INVALID_TIME otherwise."""
    if _MILLIS.fullmatch(value) is not None and int(value) <= MAX_SAFE_INTEGER:
        return int(value)
    try:
        # A moment before 1970 is before every record: the same as the epoch.
        return max(0, rfc3339_ms(value))
    except ValueError as error:
        raise ProtocolError(
            ErrorCode.INVALID_TIME,
            f"at {value!r} is invalid: expected milliseconds since 1970-01-01T00:00:00Z"
            f" (at most {MAX_SAFE_INTEGER}) or {error}",
        ) from None


def parse_bounds(query: Mapping[str, str]) -> Bounds:
    """`max_bytes` and `max_messages`: each absent or a whole number from 1 to 2**53 - 1."""
    return Bounds(_count(query, "max_bytes"), _count(query, "max_messages"))


def _count(query: Mapping[str, str], name: str) -> int | None:
    value = query.get(name)
    if value is None:
        return None
    if _COUNT.fullmatch(value) is None or int(value) > MAX_SAFE_INTEGER:
        raise ProtocolError(
            ErrorCode.INVALID_QUERY,
            f"{name} {value!r} is invalid: expected a whole number from 1 to {MAX_SAFE_INTEGER}",
        )
    return int(value)
