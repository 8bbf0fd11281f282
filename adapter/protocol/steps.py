"""The steps of the stream state machine: what a command is decided against and what it yields.

Given a `View`, a command and the time, `Machine.apply` (`adapter/protocol/stream_machine.py`)
returns one `Step`:

- `Write`: the records to append (Kafka-free: messages and lifecycle events), the stream's
  next state and the producer state to commit with them; `settle` turns it into the
  committed state once Kafka has assigned the records' offsets;
- `Done`: nothing to write, the reply is known (a duplicate, closing a closed stream, an
  existing stream created again with the same configuration);
- `Refused`: the error the request gets;
- `Renewed` (an access's step only): the stream's sliding TTL starts again; nothing is
  written (see `Renewed`). An append decided on committed state is an access too, answered or
  refused: its step's `renewed` is the stream with its TTL started again, to hold at once
  (`renewal`). The one rule of a sliding TTL is `accessed`;
- `NOTHING`: the command does nothing here (an access to a stream without a sliding TTL, a
  sweep's collection or expiry of a stream that is not due);
- `SETTLE`: the view was a pending one (appends queued, not yet committed) and this command
  must be decided against committed state: refusals and repeats answer with what is
  committed, If-Match compares the committed tail, and an append without data has no
  offsets of its own to find its tail by.

Also the two refusals every command shares: a stream missing (or expired) and one
soft-deleted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Final, Literal

from adapter.protocol import snapshots
from adapter.protocol.commands import Appended, Created
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.model import ProducerRecord, SnapshotPointer, StreamMeta
from adapter.protocol.producers import ProducerPosition
from topology.wire import ControlEvent, ProducerStamp

# An append of a JSON array becomes one record per element, all in one transaction.
DEFAULT_MAX_APPEND_MESSAGES: Final = 10_000
DEFAULT_CONTENT_TYPE: Final = "application/octet-stream"


@dataclass(frozen=True)
class View:
    """What a command is decided against.

    `stream` is None when the stream does not exist. `pending` says the state is the one the
    stream's queued, uncommitted appends will leave (its `next_offset` is then stale), and
    `broken` that one of them failed, so that state is not to be trusted.

    For a creation, `partition` is where a plain stream goes (a fork goes where its source
    is). For a fork's creation, `source` is the source as committed, `source_snapshot` its visible
    snapshot and `following` its messages from the fork offset on (read only for a
    sub-offset). For a deletion, `forks` counts the
    stream's live forks, and `ancestors` are the streams it was forked from, nearest first,
    each with its own count of live forks.
    """

    stream: StreamMeta | None
    producers: Mapping[str, ProducerPosition | ProducerRecord] = field(default_factory=dict)
    pending: bool = False
    broken: bool = False
    source: StreamMeta | None = None
    source_snapshot: SnapshotPointer | None = None
    following: Sequence[bytes] = ()
    forks: int = 0
    ancestors: Sequence[tuple[StreamMeta, int]] = ()
    partition: int = 0


@dataclass(frozen=True)
class Limits:
    max_append_messages: int = DEFAULT_MAX_APPEND_MESSAGES
    max_snapshot_bytes: int = snapshots.DEFAULT_MAX_SNAPSHOT_BYTES


DEFAULT_LIMITS: Final = Limits()


@dataclass(frozen=True)
class Message:
    """A data record: exactly the bytes of one message."""

    body: bytes


# A data record, or a lifecycle (control) record ordered with the data in the partition.
Entry = Message | ControlEvent


@dataclass(frozen=True)
class Write:
    """Records to append, and the state they leave once committed (see `settle`)."""

    entries: tuple[Entry, ...]
    # The stream after the write, but for its offsets; None when the write deletes it.
    state: StreamMeta | None
    at_ms: int
    producer: tuple[str, ProducerPosition] | None = None  # accepted, committed with the data
    stamp: ProducerStamp | None = None  # who wrote the data, for its records' headers
    seq: str | None = None  # the Stream-Seq the append named, for its records' headers
    forget: tuple[str, ...] = ()  # producer ids whose states go with this write
    creates: bool = False
    # Soft-deleted ancestors (bucket, stream), of its partition, forgotten with it.
    collects: tuple[tuple[str, str], ...] = ()
    snapshot: SnapshotPointer | None = None  # the stream's new latest snapshot
    renewed: StreamMeta | None = None  # the access the command was (see `renewal`)

    @property
    def messages(self) -> list[bytes]:
        return [entry.body for entry in self.entries if isinstance(entry, Message)]


@dataclass(frozen=True)
class Done:
    reply: Appended | Created
    renewed: StreamMeta | None = None  # the access the command was (see `renewal`)


@dataclass(frozen=True)
class Refused:
    error: ProtocolError
    renewed: StreamMeta | None = None  # the access the command was (see `renewal`)


@dataclass(frozen=True)
class Renewed:
    """An access's step: the stream with its sliding TTL started again at the access.

    An access writes no record of its own: the new state is held in the catalog, written with
    the stream's next write, and reads served by other instances reach the owner, which
    decides expiry, as accesses of its own (`adapter/cluster/access_relay.py`).
    """

    state: StreamMeta


class _Marker(Enum):
    SETTLE = "settle"
    NOTHING = "nothing"


SETTLE: Final = _Marker.SETTLE
NOTHING: Final = _Marker.NOTHING
Step = Write | Done | Refused | Renewed | Literal[_Marker.SETTLE, _Marker.NOTHING]


def accessed(meta: StreamMeta, at_ms: int) -> StreamMeta:
    """The one rule of a sliding TTL: the stream after an access (a read or a write) at
    `at_ms`. Its TTL starts again from it; an absolute `Expires-At` does not move, nor does a
    stream without expiry, and an access at least as recent known already stays, so accesses
    told late or out of order never shorten a stream's life. `meta` itself when nothing moves.
    """
    if meta.ttl_seconds is None or at_ms <= meta.last_access_ms:
        return meta
    return meta.evolve(last_access_ms=at_ms)


def renewal(step: Step) -> StreamMeta | None:
    """The stream as the access a step stands for left it, for the caller to hold at once (in
    memory: it is written with the stream's next write); None when the step renews nothing."""
    if isinstance(step, Renewed):
        return step.state
    if isinstance(step, Write | Done | Refused):
        return step.renewed
    return None


def settle(
    write: Write, offsets: Sequence[int], answered_ms: int | None = None
) -> StreamMeta | None:
    """The stream's state once `write` committed at `offsets` (one per entry, in order).

    Its tail follows its last message; a write without messages leaves the tail it was
    decided against (`append` never decides one against a pending state), and a creation
    starts the stream at its `create` record. Given `answered_ms`, when the write is answered,
    a sliding TTL starts again from then: a commit that took long must not leave the client
    less than the TTL it asked for.
    """
    if write.state is None:
        return None
    state = write.state
    tail = state.next_offset
    if write.creates:
        state = state.evolve(start_offset=offsets[0])
        tail = offsets[0] + 1
    last = _last_message_index(write.entries)
    if last is not None:
        tail = offsets[last] + 1
    state = state.evolve(next_offset=tail)
    return state if answered_ms is None else accessed(state, answered_ms)


def message_offsets(write: Write, offsets: Sequence[int]) -> list[int]:
    """The offsets of the write's messages (its lifecycle records left out)."""
    return [o for o, e in zip(offsets, write.entries, strict=True) if isinstance(e, Message)]


def _last_message_index(entries: tuple[Entry, ...]) -> int | None:
    for index in range(len(entries) - 1, -1, -1):
        if isinstance(entries[index], Message):
            return index
    return None


def not_found(stream_id: str) -> ProtocolError:
    return ProtocolError(ErrorCode.STREAM_NOT_FOUND, f"stream {stream_id!r} not found")


def gone(stream_id: str) -> ProtocolError:
    return ProtocolError(
        ErrorCode.GONE, f"stream {stream_id!r} was deleted (forks of it still read its data)"
    )
