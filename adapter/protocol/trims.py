"""The body of `POST {stream}/trim`: `{"before": "<offset token>"}`, where the stream's
messages below that offset are removed (the stream machine's `Trim` decides what it does), or
`{"at": <ms since the epoch or RFC 3339 time>}`: below the first message appended at or after
that moment (found as a read by time finds it, `service/time_lookups.py`).

`before` is a `Stream-Next-Offset` token, `now` (the tail: every message so far) or `-1` (the
beginning: nothing). Any other body is refused with a precise code: not JSON at all is
`invalid_json`, a JSON text of another shape `invalid_trim`, a malformed token
`invalid_offset`, a malformed time `invalid_time`.

A trim is readable at once; storage (Kafka and the cold tier) is freed below a trim point only
once every instance has followed it for a grace period (`snapshots.needed_from`). A stream
trimmed more often than that (age retention trims every few seconds) would never have its
latest point settled, so each trim also keeps what storage may follow (`trimmed`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.json_bodies import read_json
from adapter.protocol.model import StreamMeta
from adapter.protocol.offsets import ReadFrom, parse_offset
from adapter.protocol.read_options import parse_moment


@dataclass(frozen=True)
class TrimAt:
    """A trim by time: below the first message appended at or after `at_ms`."""

    at_ms: int


def parse_trim(body: bytes) -> ReadFrom | TrimAt:
    """Where a trim body says the stream's messages stop being readable."""
    document: Any = read_json(body, "trim body")
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


def trimmed(meta: StreamMeta, before: int, now_ms: int, settle_ms: int) -> StreamMeta:
    """The stream trimmed to `before` at `now_ms`, with the points storage may follow.

    Three points: the latest trim (`trimmed_to`, readable at once), an earlier one waiting out
    `settle_ms` (`trim_settling_to`), and the furthest that had waited it out (`trim_settled_to`).
    A point that has waited long enough joins the settled one; the trim being replaced takes
    the waiting place when that is free. So storage follows trims that never stop at most two
    grace periods behind, and never a point some instance may not have followed for one."""
    settled_by = now_ms - settle_ms
    settled = meta.trim_settled_to
    points = (
        (meta.trim_settling_to, meta.trim_settling_at_ms),
        (meta.trimmed_to, meta.trimmed_at_ms),
    )
    waiting: tuple[int | None, int | None] = (None, None)
    for to, at in points:
        if to is None or at is None:
            continue
        if at <= settled_by:
            settled = to if settled is None else max(settled, to)
        elif waiting[0] is None:
            waiting = (to, at)
    return meta.evolve(
        trimmed_to=before,
        trimmed_at_ms=now_ms,
        trim_settled_to=settled,
        trim_settling_to=waiting[0],
        trim_settling_at_ms=waiting[1],
    )


_SHAPE = 'a trim body must be {"before": "<offset token>"} or {"at": <time>}'
