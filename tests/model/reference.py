"""The reference model of the protocol the model-based test checks the server against, written
from the protocol documents (base protocol, extensions, fork) and docs/operations.md, never
from the server's code: what every acknowledged message is, where each stream may start now,
and what each read may therefore answer.

Offsets are opaque tokens that sort lexicographically (base protocol, "Offsets"). The model
keeps each stream's *boundaries*: the token before its first message, then each message's
`Stream-Next-Offset` as acknowledged. Where a stream starts (its earliest retained offset) is
known exactly after a trim or a snapshot, and only within a range where age retention or an
inherited cut may have moved it: `earliest_range` is that range, in message counts. A message
is then either readable byte-exact at its offset or below the earliest offset, never missing
in the middle and never altered."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Literal

SHORT_AGE_MS = 1_000  # the least `max_age_ms`: messages go within a second or so
LONG_AGE_MS = 600_000  # nothing a run writes is this old: retention must cut nothing
AGE_MARGIN_MS = 50  # a message sent this much inside its age is certainly kept (ms rounding)

Retention = Literal["none", "short", "long"]
AGES: dict[Retention, int | None] = {"none": None, "short": SHORT_AGE_MS, "long": LONG_AGE_MS}


@dataclass(frozen=True)
class Message:
    """One acknowledged message: its bytes (text) or value (JSON), the offset after it, and
    the moments its append was sent and answered (its record's time lies between)."""

    value: Any
    end: str
    sent_ms: float
    acked_ms: float


@dataclass
class Bucket:
    name: str
    retention: Retention
    housed_cross_fork: bool = False  # ever held a fork of another bucket's stream

    @property
    def max_age_ms(self) -> int | None:
        return AGES[self.retention]


@dataclass(eq=False)
class Stream:
    bucket: str
    name: str
    is_json: bool
    home: str  # the bucket whose topic holds its records (a fork's: its source's)
    boundaries: list[str]  # the token before the first message, then each message's end
    messages: list[Message] = field(default_factory=list)
    source: Stream | None = None
    forks: list[Stream] = field(default_factory=list)
    state: Literal["live", "soft", "gone"] = "live"
    gone_below: int = 0  # messages below this count are certainly gone (trim, snapshot, seen)
    unsure_below: int = 0  # below this count a message may be gone (an inherited cut)
    cut_ever: bool = False  # a trim, snapshot or retention may have moved its earliest offset
    fence: str | None = None
    etag: str | None = None  # the ETag of the latest change, if the model knows it
    stale_etag: str | None = None  # an ETag from before a later append
    producer_seq: int = 0
    snapshot: tuple[int, bytes] | None = None  # (message count it covers, its body)

    @property
    def key(self) -> tuple[str, str]:
        return (self.bucket, self.name)

    created_tail: str = ""  # the tail its creation answered (a fork's may lie past its offset)
    # When its creation (or fork) was sent and answered: its `created_at_ms` lies between.
    created_within: tuple[float, float] = (-math.inf, math.inf)

    @property
    def tail(self) -> str:
        return max(self.boundaries[-1], self.created_tail)

    def appended(self, message: Message) -> None:
        assert message.end > self.tail, f"offset {message.end} not after {self.tail}"
        self.messages.append(message)
        self.boundaries.append(message.end)

    def count_below(self, token: str) -> int:
        """How many messages lie wholly below `token` (an earliest offset)."""
        return sum(1 for message in self.messages if message.end <= token)

    def value_of(self, start: int, stop: int | None = None) -> Any:
        """What a read of messages[start:stop] answers: bytes, or a list of JSON values."""
        chosen = [message.value for message in self.messages[start:stop]]
        return chosen if self.is_json else b"".join(chosen)


class Model:
    """Buckets and streams as the protocol says they now are."""

    def __init__(self) -> None:
        self.buckets: dict[str, Bucket] = {}
        self.streams: dict[tuple[str, str], Stream] = {}

    # -- what exists -----------------------------------------------------------------------

    def live(self) -> list[Stream]:
        return [stream for stream in self.streams.values() if stream.state == "live"]

    def in_bucket(self, bucket: str) -> list[Stream]:
        return [stream for stream in self.streams.values() if stream.bucket == bucket]

    def bucket_deletable(self, bucket: str) -> bool:
        """An empty bucket: no stream of its own (live or soft-deleted) and no fork of
        another bucket's stream housed in its topic (architecture, "Forks")."""
        return not any(s.bucket == bucket or s.home == bucket for s in self.streams.values())

    def held_in(self, bucket: str) -> int:
        """How many streams' records the bucket's topic holds (forks of other buckets' streams
        are held in their source's)."""
        return sum(1 for s in self.streams.values() if s.home == bucket)

    def has_own_streams(self, bucket: str) -> bool:
        return any(s.bucket == bucket and s.home == bucket for s in self.streams.values())

    # -- where a stream starts ---------------------------------------------------------------

    def earliest_range(self, stream: Stream, now_ms: float) -> tuple[int, int]:
        """(lo, hi): the stream's earliest retained offset lies after `lo` messages and at
        most after `hi`. Age retention may cut a message sent before `now - max_age`."""
        lo = stream.gone_below
        hi = max(lo, stream.unsure_below)
        age = self.buckets[stream.bucket].max_age_ms
        if age is not None:
            old = now_ms - age + AGE_MARGIN_MS
            hi = max(hi, sum(1 for message in stream.messages if message.sent_ms < old))
        return lo, min(hi, len(stream.messages))

    def may_cut(self, stream: Stream) -> bool:
        return stream.cut_ever or self.buckets[stream.bucket].max_age_ms is not None

    def seen_earliest(self, stream: Stream, token: str) -> None:
        """An answer named `token` as the earliest offset: it never moves back."""
        stream.gone_below = max(stream.gone_below, stream.count_below(token))

    # -- changes ---------------------------------------------------------------------------

    def create(self, bucket: str, name: str, is_json: bool, start: str) -> Stream:
        stream = Stream(bucket, name, is_json, home=bucket, boundaries=[start], created_tail=start)
        self.streams[stream.key] = stream
        return stream

    def fork(
        self, source: Stream, bucket: str, name: str, inherited: int, start: str, now_ms: float
    ) -> Stream:
        """A fork of `source` inheriting its first `inherited` messages (base: their tokens),
        at the tail `start` its creation answered (past its fork offset: its own creation's
        record lies there), its earliest offset its source's at the fork (known within the
        source's range)."""
        lo, hi = self.earliest_range(source, now_ms)
        boundaries = source.boundaries[: inherited + 1] if inherited else [start]
        fork = Stream(
            bucket,
            name,
            source.is_json,
            home=source.home,
            boundaries=list(boundaries),
            messages=list(source.messages[:inherited]),
            source=source,
            created_tail=start,
            gone_below=min(lo, inherited),
            unsure_below=min(hi, inherited),
            cut_ever=self.may_cut(source),
            snapshot=source.snapshot
            if source.snapshot and source.snapshot[0] <= inherited
            else None,
        )
        source.forks.append(fork)
        self.streams[fork.key] = fork
        if fork.home != bucket:
            self.buckets[bucket].housed_cross_fork = True
        return fork

    def cut(self, stream: Stream, token: str) -> None:
        """A trim or snapshot answered `token` as the stream's earliest offset."""
        stream.cut_ever = True
        self.seen_earliest(stream, token)
        stream.etag = None  # whether a cut changes the ETag is not the model's to know

    def delete(self, stream: Stream) -> None:
        """Deleted: soft while forks of it remain (their history reads its records), else
        gone, and a soft-deleted source whose last fork this was goes with it."""
        stream.state = "soft" if any(f.state != "gone" for f in stream.forks) else "gone"
        while stream.state == "gone":
            del self.streams[stream.key]
            source = stream.source
            if source is None or source.state != "soft":
                return
            if any(f.state != "gone" for f in source.forks):
                return
            source.state = "gone"
            stream = source

    def delete_bucket(self, bucket: str) -> None:
        del self.buckets[bucket]


def time_range(stream: Stream, moment_ms: int) -> tuple[int, int]:
    """(kmin, kmax): the first message at or after `moment_ms` (operations, "Reads by time")
    is after kmin messages and at most after kmax; a record's time lies between its append's
    sending and answer, at the millisecond."""
    kmin = sum(1 for m in stream.messages if math.ceil(m.acked_ms) < moment_ms)
    kmax = next(
        (i for i, m in enumerate(stream.messages) if math.floor(m.sent_ms) >= moment_ms),
        len(stream.messages),
    )
    return kmin, max(kmin, kmax)


def decoded(stream: Stream, body: bytes) -> Any:
    """A read's body as the model compares it: bytes, or the JSON array's values."""
    return json.loads(body) if stream.is_json else body


def joined(stream: Stream, parts: list[Any]) -> Any:
    if stream.is_json:
        return [value for part in parts for value in part]
    return b"".join(parts)


def starts_at(stream: Stream, value: Any, lo: int, hi: int) -> int | None:
    """The count k in [lo, hi] such that `value` is exactly messages[k:], if there is one."""
    return next((k for k in range(lo, hi + 1) if stream.value_of(k) == value), None)
