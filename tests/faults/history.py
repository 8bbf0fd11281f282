"""What the fault suite records: every client operation with its times and outcome, every
record a fresh `read_committed` consumer finds in Kafka, and every record the cold tier's
manifest lists (read from the object store)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum


class Outcome(StrEnum):
    """How one HTTP attempt ended, as the client saw it."""

    ACK = "ack"  # 2xx
    REJECTED = "rejected"  # 4xx: the server says it did nothing
    FAILED = "failed"  # 5xx but 504: the server says it did nothing
    TIMEOUT = "timeout"  # no answer in time, or 504 outcome_unknown: unknown
    LOST = "lost"  # connection lost: unknown

    @classmethod
    def of_status(cls, status: int) -> Outcome:
        if 200 <= status < 300:
            return cls.ACK
        if status == 504:  # outcome_unknown: the server says it does not know
            return cls.TIMEOUT
        return cls.REJECTED if 400 <= status < 500 else cls.FAILED


@dataclass(frozen=True)
class Producer:
    producer_id: str
    epoch: int
    seq: int


@dataclass(frozen=True)
class Write:
    """One attempt of an append (or a close: `close` with or without a payload).

    `payload` names the logical append: the same across retries of one append with
    `Producer-*` or `Stream-Seq`, fresh for every attempt of a plain append (never retried).
    """

    stream: str
    payload: str | None
    invoked: float
    completed: float
    outcome: Outcome
    status: int = 0
    producer: Producer | None = None
    close: bool = False
    instance: str = ""
    next_offset: int | None = None  # the tail an acknowledged append answered


@dataclass(frozen=True)
class Read:
    """Messages a client was served (GET, long-poll or one SSE data+control pair), with the
    Kafka offsets they came from: every data record of the stream in [start, next_offset)."""

    stream: str
    start: int
    next_offset: int
    payloads: tuple[str, ...]
    completed: float
    kind: str = "get"  # "get", "catchup" (a read through to the tail), "long-poll", "sse"
    invoked: float | None = None  # when a one-off GET was sent (live reads leave it out)
    up_to_date: bool = False  # the answer said `Stream-Up-To-Date: true`


@dataclass(frozen=True)
class Bootstrap:
    """One `/bootstrap` answered in full: its snapshot (offset and body; None without one) and
    the messages after it, up to `next_offset`, which it says is the tail (up to date)."""

    stream: str
    snapshot_offset: int | None
    snapshot: str | None
    next_offset: int
    payloads: tuple[str, ...]
    invoked: float
    completed: float


@dataclass(frozen=True)
class Lifecycle:
    """A create or delete of a stream."""

    stream: str
    action: str  # "create" | "delete"
    invoked: float
    completed: float
    outcome: Outcome
    status: int = 0


@dataclass(frozen=True)
class BucketEvent:
    """A create or delete of a bucket (its streams are named `{bucket}/{stream}`)."""

    bucket: str
    action: str  # "create" | "delete"
    invoked: float
    completed: float
    outcome: Outcome
    status: int = 0


@dataclass(frozen=True)
class Publish:
    """One attempt to publish a snapshot: its offset and the blob's body (unique per publish,
    the same across retries)."""

    stream: str
    offset: int
    blob: str
    invoked: float
    completed: float
    outcome: Outcome
    status: int = 0


@dataclass(frozen=True)
class Trim:
    """One attempt to trim a stream below `offset` (`{"before": <offset>}`)."""

    stream: str
    offset: int
    invoked: float
    completed: float
    outcome: Outcome
    status: int = 0


@dataclass(frozen=True)
class Fork:
    """One attempt to create `stream` as a fork of `source` at `offset` (retried alike)."""

    stream: str
    source: str
    offset: int
    invoked: float
    completed: float
    outcome: Outcome
    status: int = 0


@dataclass(frozen=True)
class LogRecord:
    """One committed record of a stream, decoded with topology/wire.py."""

    stream: str
    offset: int
    payload: str | None  # a data record's payload id; None for a control record
    control: str | None = None  # "create" | "close" | "delete"
    producer: Producer | None = None


@dataclass(frozen=True)
class View:
    """What one instance answers for a stream at the end: HEAD and a full GET."""

    status: int
    next_offset: int | None
    closed: bool
    payloads: tuple[str, ...]  # from its snapshot's offset when it has one, else from -1
    snapshot_offset: int | None = None
    snapshot: str | None = None  # the visible snapshot's body
    below: int = 0  # the status of a read from -1 when it has a snapshot (410 expected)
    earliest: int | None = None  # where a trimmed stream starts (a read from -1's 410 says)


@dataclass(frozen=True)
class ColdTier:
    """What the cold tier's manifest lists for the buckets as they are at the end: every
    record of the chunks it names, and the chunks the object store does not hold."""

    records: list[LogRecord] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # object keys listed, not in the store


@dataclass
class History:
    writes: list[Write] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    lifecycle: list[Lifecycle] = field(default_factory=list)
    publishes: list[Publish] = field(default_factory=list)
    forks: list[Fork] = field(default_factory=list)
    bootstraps: list[Bootstrap] = field(default_factory=list)
    buckets: list[BucketEvent] = field(default_factory=list)
    trims: list[Trim] = field(default_factory=list)
    fences: list[Outcome] = field(default_factory=list)  # each fence attempt's outcome

    @staticmethod
    def now() -> float:
        return time.monotonic()

    @property
    def operations(self) -> int:
        return (
            len(self.writes)
            + len(self.reads)
            + len(self.lifecycle)
            + len(self.publishes)
            + len(self.forks)
            + len(self.bootstraps)
            + len(self.buckets)
            + len(self.trims)
            + len(self.fences)
        )
