"""Request header values of the protocol, parsed strictly into typed values.

Each parser takes the raw header value (None when the header is absent) and either returns a
typed value or raises INVALID_HEADER with a message naming the header and what was wrong
(content codings have their own module, `codings`). The answer's
Stream-Expires-At is rendered here too, beside its parser.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Final

from adapter.protocol.errors import ErrorCode, ProtocolError
from topology.wire import ProducerStamp

# Stream-TTL and the producer numbers must survive JavaScript clients (2**53 - 1), and
# a TTL in milliseconds added to "now" still fits a signed 64-bit long.
MAX_SAFE_INTEGER: Final = 2**53 - 1
_MAX_SAFE_DIGITS: Final = len(str(MAX_SAFE_INTEGER))
_TTL: Final = re.compile(r"0|[1-9][0-9]*")
_DIGITS: Final = re.compile(r"[0-9]+")
_RFC3339: Final = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?"
    r"([Zz]|[+-][0-9]{2}:[0-9]{2})"
)
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MS: Final = timedelta(milliseconds=1)
# The instants Stream-Expires-At can name: years 1 to 9999 once converted to UTC.
_REPRESENTABLE: Final = "a real date and time from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z"
_FIRST_MS: Final = (datetime.min.replace(tzinfo=UTC) - _EPOCH) // _MS
_LAST_MS: Final = (datetime.max.replace(tzinfo=UTC) - _EPOCH) // _MS
# RFC 9110 §5.6.2 token, and the media-type grammar of §8.3.1.
_TOKEN: Final = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
# A fencing token: 1 to 64 visible ASCII characters (no spaces, so nothing is trimmed away).
_FENCING_TOKEN: Final = re.compile(r"[\x21-\x7e]{1,64}")
_MEDIA_TYPE: Final = re.compile(rf"[ \t]*({_TOKEN})/({_TOKEN})[ \t]*")
_PARAMETER: Final = re.compile(
    rf';[ \t]*(?:({_TOKEN})[ \t]*=[ \t]*({_TOKEN}|"(?:[^"\\]|\\.)*"))?[ \t]*'
)


@dataclass(frozen=True)
class Expiry:
    """A stream's lifetime: a sliding TTL, an absolute deadline, or neither (never both)."""

    ttl_seconds: int | None
    expires_at_ms: int | None


def is_true(value: str | None) -> bool:
    """Stream-Closed semantics: present only when exactly `true`, in any case; else ignored."""
    return value is not None and value.isascii() and value.lower() == "true"


def parse_ttl(value: str | None) -> int | None:
    """Stream-TTL in seconds: `0` or a decimal without sign, leading zero, point or exponent."""
    if value is None:
        return None
    if _TTL.fullmatch(value) is None:
        raise _invalid("Stream-TTL", value, "a non-negative integer without leading zeros")
    if len(value) > _MAX_SAFE_DIGITS or int(value) > MAX_SAFE_INTEGER:
        raise _invalid("Stream-TTL", value, f"at most {MAX_SAFE_INTEGER} seconds")
    return int(value)


def parse_expires_at(value: str | None) -> int | None:
    """Stream-Expires-At, an RFC 3339 date-time, as epoch milliseconds (fraction truncated).

    `T` and `Z` may be lower case (RFC 3339 §5.6); a leap second `:60` is the next second.
    Whether the moment is already past is for the caller to judge.
    """
    if value is None:
        return None
    try:
        moment = rfc3339_ms(value)
    except ValueError as error:
        raise _invalid("Stream-Expires-At", value, str(error)) from None
    return moment


def rfc3339_ms(value: str) -> int:
    """An RFC 3339 date-time as epoch milliseconds (fraction truncated); ValueError saying
    what was expected when it is not one, or names no real instant."""
    match = _RFC3339.fullmatch(value)
    if match is None:
        raise ValueError("an RFC 3339 timestamp")
    try:
        moment = _moment(match).astimezone(UTC)  # in UTC, the year must still be 1 to 9999
    except (ValueError, OverflowError):
        raise ValueError(_REPRESENTABLE) from None
    return (moment - _EPOCH) // _MS + _fraction_ms(match[7])


def format_expires_at(expires_at_ms: int) -> str:
    """Stream-Expires-At as answered: UTC, milliseconds, `Z` (`2030-01-02T03:04:05.678Z`).

    Total over every stored value: one outside the range `parse_expires_at` takes (written
    before it checked the range) is clamped to that range's nearest end, never an error.
    """
    clamped = min(max(expires_at_ms, _FIRST_MS), _LAST_MS)
    moment = _EPOCH + clamped * _MS
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_expiry(ttl: str | None, expires_at: str | None) -> Expiry:
    """Stream-TTL and Stream-Expires-At together: sending both is refused, not resolved."""
    if ttl is not None and expires_at is not None:
        raise ProtocolError(
            ErrorCode.INVALID_HEADER, "send either Stream-TTL or Stream-Expires-At, not both"
        )
    return Expiry(ttl_seconds=parse_ttl(ttl), expires_at_ms=parse_expires_at(expires_at))


@functools.lru_cache(maxsize=256)  # every append sends one; a server sees few distinct ones
def normalize_content_type(value: str | None) -> str | None:
    """A Content-Type in canonical form, or None when absent or blank.

    Type, subtype and parameter names are lower-cased, parameter values kept as sent, and
    parameters joined by `; ` (`TEXT/Plain;charset=UTF-8` -> `text/plain; charset=UTF-8`).
    A value that is not a media type is INVALID_HEADER.
    """
    if value is None or not value.strip(" \t"):
        return None
    match = _MEDIA_TYPE.match(value)
    if match is None:
        raise _invalid("Content-Type", value, "a media type such as text/plain")
    parts = [f"{match[1]}/{match[2]}".lower()]
    position = match.end()
    while position < len(value):
        parameter = _PARAMETER.match(value, position)
        if parameter is None:
            raise _invalid("Content-Type", value, "a media type with name=value parameters")
        if parameter[1]:
            parts.append(f"{parameter[1].lower()}={parameter[2]}")
        position = parameter.end()
    return "; ".join(parts)


@functools.lru_cache(maxsize=256)  # asked several times per append, of a few distinct types
def media_type(content_type: str) -> str:
    """The `type/subtype` of a content type, lower-cased, without parameters."""
    return content_type.split(";", 1)[0].strip(" \t").lower()


def content_types_match(stream_ct: str, request_ct: str) -> bool:
    """Whether an append's type is the stream's: media types compared, case and parameters
    ignored (`TEXT/PLAIN` and `text/plain;charset=UTF-8` both match `text/plain`)."""
    return media_type(stream_ct) == media_type(request_ct)


def is_json(content_type: str) -> bool:
    """JSON mode (spec §7.1) is `application/json` only: `+json` types are opaque bytes."""
    return media_type(content_type) == "application/json"


def is_text_like(content_type: str) -> bool:
    """Whether SSE carries the bytes as UTF-8 text (`text/*`, `application/json`), not base64."""
    kind = media_type(content_type)
    return kind.startswith("text/") or kind == "application/json"


def parse_stream_seq(value: str | None) -> str | None:
    """Stream-Seq: an opaque writer sequence, non-empty when sent."""
    if value == "":
        raise _invalid("Stream-Seq", value, "a non-empty string")
    if value is not None:
        try:
            _seq_bytes(value)
        except UnicodeEncodeError:
            raise _invalid("Stream-Seq", value, "text that encodes as bytes") from None
    return value


def parse_fencing_token(value: str | None) -> str | None:
    """Stream-Fencing-Token: 1 to 64 visible ASCII characters, when sent."""
    if value is not None and not _FENCING_TOKEN.fullmatch(value):
        raise _invalid("Stream-Fencing-Token", value, "1 to 64 visible ASCII characters")
    return value


def seq_is_greater(new: str, last: str | None) -> bool:
    """Whether Stream-Seq `new` comes strictly after `last`, comparing the bytes as sent.

    Byte-wise lexicographic on UTF-8 ("10" < "2", "B" < "a"); header text that aiohttp
    decoded with surrogate escapes turns back into its original bytes.
    """
    return last is None or _seq_bytes(new) > _seq_bytes(last)


def parse_producer(pid: str | None, epoch: str | None, seq: str | None) -> ProducerStamp | None:
    """Producer-Id, Producer-Epoch and Producer-Seq: all three or none of them.

    The id must not be empty; epoch and seq are decimal digits only (leading zeros allowed,
    as in the reference server), at most 2**53-1.
    """
    if pid is None and epoch is None and seq is None:
        return None
    if pid is None or epoch is None or seq is None:
        raise ProtocolError(
            ErrorCode.INVALID_HEADER,
            "Producer-Id, Producer-Epoch and Producer-Seq must be sent together",
        )
    if not pid:
        raise _invalid("Producer-Id", pid, "a non-empty string")
    if not _is_utf8(pid):
        raise _invalid("Producer-Id", pid, "UTF-8 text")
    return ProducerStamp(
        pid, _producer_number("Producer-Epoch", epoch), _producer_number("Producer-Seq", seq)
    )


def _producer_number(header: str, value: str) -> int:
    significant = value.lstrip("0") or "0"
    if _DIGITS.fullmatch(value) is None or len(significant) > _MAX_SAFE_DIGITS:
        raise _invalid(header, value, f"an integer from 0 to {MAX_SAFE_INTEGER}")
    number = int(significant)
    if number > MAX_SAFE_INTEGER:
        raise _invalid(header, value, f"an integer from 0 to {MAX_SAFE_INTEGER}")
    return number


def _moment(match: re.Match[str]) -> datetime:
    year, month, day, hour, minute, second = (int(match[group]) for group in range(1, 7))
    leap = second == 60
    moment = datetime(
        year, month, day, hour, minute, 59 if leap else second, tzinfo=_zone(match[8])
    )
    return moment + timedelta(seconds=1) if leap else moment


def _zone(designator: str) -> timezone:
    if designator in ("Z", "z"):
        return UTC
    hours, minutes = int(designator[1:3]), int(designator[4:6])
    if hours > 23 or minutes > 59:
        raise ValueError(f"time offset {designator} out of range")
    sign = -1 if designator[0] == "-" else 1
    return timezone(sign * timedelta(hours=hours, minutes=minutes))


def _fraction_ms(fraction: str | None) -> int:
    return int((fraction[1:] + "00")[:3]) if fraction else 0


def _is_utf8(value: str) -> bool:
    """Whether header text aiohttp decoded holds only valid UTF-8 (no surrogate escapes)."""
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def _seq_bytes(seq: str) -> bytes:
    return seq.encode("utf-8", "surrogateescape")


def _invalid(header: str, value: str, expected: str) -> ProtocolError:
    return ProtocolError(
        ErrorCode.INVALID_HEADER, f"{header} {value!r} is invalid: expected {expected}"
    )
