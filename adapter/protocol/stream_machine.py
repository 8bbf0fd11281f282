"""A stream's write-side rules as one pure state machine: state and command in, a step out.

Every protocol rule decided when a stream changes lives here: content-type match, closure,
`Stream-Seq`, `If-Match`, idempotent producers (epoch and seq), TTL and expiry, JSON
flattening and its limits, forks (what they inherit, `adapter/protocol/forks.py`), the
soft deletion of a stream its forks still read, and snapshot publication with the retention it
moves (`adapter/protocol/snapshots.py`). Given what a command is decided against (a
`View`), the command and the time, a function returns one `Step`:

- `Write`: the records to append (Kafka-free: messages and lifecycle events), the stream's
  next state and the producer state to commit with them; `settle` turns it into the
  committed state once Kafka has assigned the records' offsets;
- `Done`: nothing to write, the reply is known (a duplicate, closing a closed stream, an
  existing stream created again with the same configuration);
- `Refused`: the error the request gets;
- `SETTLE`: the view was a pending one (appends queued, not yet committed) and this command
  must be decided against committed state: refusals and repeats answer with what is
  committed, If-Match compares the committed tail, and an append without data has no
  offsets of its own to find its tail by.

No asyncio, no Kafka, no HTTP, no clock: the caller passes the time and carries steps out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Final, Literal

from adapter.protocol import forks, json_mode, snapshots
from adapter.protocol.caching import if_match_matches
from adapter.protocol.commands import (
    Append,
    Appended,
    Created,
    CreateStream,
    ForkFrom,
    PublishSnapshot,
)
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.headers import ProducerHeaders, content_types_match, is_json, seq_is_greater
from adapter.protocol.offsets import encode
from adapter.protocol.producers import (
    Accepted,
    Decision,
    Duplicate,
    EpochMustStartAtZero,
    Position,
    ProducerState,
    SequenceGap,
    StaleEpoch,
    decide,
)
from adapter.protocol.stream_etags import stream_etag
from adapter.state.records import SnapshotPointer, StreamMeta
from topology.wire import ControlEvent

# An append of a JSON array becomes one record per element, all in one transaction.
DEFAULT_MAX_APPEND_MESSAGES: Final = 10_000
DEFAULT_CONTENT_TYPE: Final = "application/octet-stream"


@dataclass(frozen=True)
class View:
    """What a command is decided against.

    `stream` is None when the stream does not exist. `pending` says the state is the one the
    stream's queued, uncommitted appends will leave (its `next_offset` is then stale), and
    `broken` that one of them failed, so that state is not to be trusted.

    For a fork's creation, `source` is the source as committed, `source_snapshot` its visible
    snapshot and `following` its messages from the fork offset on (read only for a
    sub-offset). For a deletion, `forks` counts the
    stream's live forks, and `ancestors` are the streams it was forked from, nearest first,
    each with its own count of live forks.
    """

    stream: StreamMeta | None
    producers: Mapping[str, Position] = field(default_factory=dict)
    pending: bool = False
    broken: bool = False
    source: StreamMeta | None = None
    source_snapshot: SnapshotPointer | None = None
    following: Sequence[bytes] = ()
    forks: int = 0
    ancestors: Sequence[tuple[StreamMeta, int]] = ()


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
    producer: tuple[str, ProducerState] | None = None  # accepted, committed with the data
    stamp: ProducerHeaders | None = None  # who wrote the data, for its records' headers
    forget: tuple[str, ...] = ()  # producer ids whose states go with this write
    creates: bool = False
    collects: tuple[str, ...] = ()  # soft-deleted ancestors (same partition) forgotten with it
    snapshot: SnapshotPointer | None = None  # the stream's new latest snapshot

    @property
    def messages(self) -> list[bytes]:
        return [entry.body for entry in self.entries if isinstance(entry, Message)]


@dataclass(frozen=True)
class Done:
    reply: Appended | Created


@dataclass(frozen=True)
class Refused:
    error: ProtocolError


class _Settle(Enum):
    SETTLE = "settle"


SETTLE: Final = _Settle.SETTLE
Step = Write | Done | Refused | Literal[_Settle.SETTLE]


# -- commands -------------------------------------------------------------------------------


def create(
    view: View, command: CreateStream, now_ms: int, partition: int, limits: Limits = DEFAULT_LIMITS
) -> Step:
    """Create a stream (or fork one); an existing one with the same configuration is a success.

    A fork lives in its source's partition, so `partition` applies to plain streams only.
    """
    existing = view.stream
    if existing is not None and existing.soft_deleted:
        return Refused(
            ProtocolError(
                ErrorCode.STREAM_EXISTS,
                f"stream {existing.stream_id!r} was deleted while forks of it live on",
            )
        )
    if existing is not None and not existing.expired(now_ms):
        if same_config(existing, command):
            return Done(Created(existing, created=False))
        return Refused(
            ProtocolError(
                ErrorCode.STREAM_EXISTS,
                f"stream {existing.stream_id!r} exists with another configuration",
            )
        )
    if command.fork is not None:
        return _fork(view, command, command.fork, now_ms, limits)
    content_type = command.content_type or DEFAULT_CONTENT_TYPE
    try:
        messages = _initial_messages(command, content_type, limits)
    except ProtocolError as error:
        return Refused(error)
    expiry = (command.ttl_seconds, command.expires_at_ms)
    return _creation(view, command, now_ms, partition, content_type, messages, expiry)


def _fork(view: View, command: CreateStream, fork: ForkFrom, now_ms: int, limits: Limits) -> Step:
    """A fork: the source's history up to the fork offset, then the fork's own records."""
    source = view.source
    if source is None or source.expired(now_ms):
        return Refused(not_found(fork.source_id))
    if source.soft_deleted:
        return Refused(
            ProtocolError(ErrorCode.SOURCE_DELETED, f"stream {fork.source_id!r} was deleted")
        )
    content_type = command.content_type or source.content_type
    if not content_types_match(source.content_type, content_type):
        return Refused(
            ProtocolError(
                ErrorCode.CONTENT_TYPE_MISMATCH,
                f"source has Content-Type {source.content_type!r}, not {content_type!r}",
            )
        )
    try:
        at = forks.cut(source, fork.offset)
        inherited_snapshot = forks.retained(source, view.source_snapshot, at)
        copied = forks.taken(source.content_type, view.following, fork.sub_offset)
        messages = _within([*copied, *_initial_messages(command, content_type, limits)], limits)
    except ProtocolError as error:
        return Refused(error)
    own_expiry = command.ttl_seconds is not None or command.expires_at_ms is not None
    ttl, expires_at = (
        (command.ttl_seconds, command.expires_at_ms)
        if own_expiry
        else (source.ttl_seconds, source.expires_at_ms)  # no expiry of its own: inherited
    )
    lineage = {
        "forked_from": source.stream_id,
        "fork_offset": source.next_offset if fork.offset is None else fork.offset,
        "fork_sub_offset": fork.sub_offset,
        "inherited": forks.inherited(source, at),
        "retained_from": source.retained_from,
    }
    expiry = (ttl, expires_at)
    write = _creation(
        view, command, now_ms, source.partition, content_type, messages, expiry, lineage
    )
    if inherited_snapshot is None:
        return write
    snapshot = replace(
        inherited_snapshot, stream_id=command.ref.stream_id, stream_created_at_ms=now_ms
    )
    return replace(write, snapshot=snapshot)


def _creation(
    view: View,
    command: CreateStream,
    now_ms: int,
    partition: int,
    content_type: str,
    messages: list[bytes],
    expiry: tuple[int | None, int | None],
    lineage: dict[str, Any] | None = None,
) -> Write:
    """The write creating a stream: its `create` record, initial messages, perhaps `close`."""
    ref = command.ref
    state = StreamMeta(
        bucket_id=ref.bucket_id,
        stream_id=ref.stream_id,
        partition=partition,
        content_type=content_type,
        created_at_ms=now_ms,
        start_offset=0,
        next_offset=0,
        last_access_ms=now_ms,
        last_write_at_ms=now_ms,
        closed=command.closed,
        ttl_seconds=expiry[0],
        expires_at_ms=expiry[1],
        message_count=len(messages),
        **(lineage or {}),
    )
    closing = (ControlEvent.CLOSE,) if command.closed else ()
    entries = (ControlEvent.CREATE, *(Message(m) for m in messages), *closing)
    # A stream created where an expired one was starts with no producer state.
    return Write(entries, state, now_ms, forget=tuple(view.producers), creates=True)


def append(view: View, command: Append, now_ms: int, limits: Limits = DEFAULT_LIMITS) -> Step:
    """Append (and perhaps close): write, repeat, or refuse."""
    if view.pending and (view.broken or command.if_match is not None):
        return SETTLE
    try:
        step = _append(view, command, now_ms, limits)
    except ProtocolError as error:
        return SETTLE if view.pending else Refused(error)
    if view.pending and not isinstance(step, Write):
        return SETTLE
    if view.pending and isinstance(step, Write) and not step.messages:
        return SETTLE  # no record of its own tells where its tail is: the committed one does
    return step


def delete(view: View, stream_id: str, now_ms: int) -> Step:
    """Delete a stream: a control record, and its state and producers forgotten.

    A stream with live forks is only soft-deleted: its forks still read its records. Deleting
    the last fork of a soft-deleted stream forgets that one too, and so on up the chain.
    """
    meta = view.stream
    if meta is not None and meta.soft_deleted:
        return Refused(gone(stream_id))
    if meta is None or meta.expired(now_ms):
        return Refused(not_found(stream_id))
    forget = tuple(view.producers)
    if view.forks:
        state = meta.evolve(soft_deleted=True)
        return Write((ControlEvent.DELETE,), state, now_ms, forget=forget)
    return Write((ControlEvent.DELETE,), None, now_ms, forget=forget, collects=_collected(view))


def collect(view: View, now_ms: int) -> Write | None:
    """Forget a soft-deleted stream none of whose forks is live any more (they expired), and
    the soft-deleted ancestors that were waiting only for it; None when it is not such a
    stream. Its delete record was written when it was soft-deleted."""
    meta = view.stream
    if meta is None or not meta.soft_deleted or view.forks:
        return None
    return Write((), None, now_ms, collects=_collected(view))


def publish(
    view: View, command: PublishSnapshot, now_ms: int, limits: Limits = DEFAULT_LIMITS
) -> Step:
    """Publish a snapshot: its pointer, and the earliest retained offset moved to it, commit
    together, with no record in the stream's partition. Decided on committed state."""
    if view.pending:
        return SETTLE
    meta = view.stream
    if meta is not None and meta.soft_deleted:
        return Refused(gone(command.ref.stream_id))
    if meta is None or meta.expired(now_ms):
        return Refused(not_found(command.ref.stream_id))
    try:
        snapshots.check_publish(meta, command, limits.max_snapshot_bytes, now_ms)
    except ProtocolError as error:
        return Refused(error)
    state = meta.evolve(retained_from=command.offset)
    return Write((), state, now_ms, snapshot=snapshots.pointer(meta, command, now_ms))


def _collected(view: View) -> tuple[str, ...]:
    """The soft-deleted ancestors whose last live fork is going (nearest first)."""
    collected: list[str] = []
    for ancestor, live_forks in view.ancestors:
        if not ancestor.soft_deleted or live_forks > 1:
            break
        collected.append(ancestor.stream_id)
    return tuple(collected)


def settle(write: Write, offsets: Sequence[int]) -> StreamMeta | None:
    """The stream's state once `write` committed at `offsets` (one per entry, in order).

    Its tail follows its last message; a write without messages leaves the tail it was
    decided against (`append` never decides one against a pending state), and a creation
    starts the stream at its `create` record.
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
    return state.evolve(next_offset=tail)


def message_offsets(write: Write, offsets: Sequence[int]) -> list[int]:
    """The offsets of the write's messages (its lifecycle records left out)."""
    return [o for o, e in zip(offsets, write.entries, strict=True) if isinstance(e, Message)]


# -- rules ----------------------------------------------------------------------------------


def not_found(stream_id: str) -> ProtocolError:
    return ProtocolError(ErrorCode.STREAM_NOT_FOUND, f"stream {stream_id!r} not found")


def gone(stream_id: str) -> ProtocolError:
    return ProtocolError(
        ErrorCode.GONE, f"stream {stream_id!r} was deleted (forks of it still read its data)"
    )


def renewed(meta: StreamMeta, now_ms: int) -> StreamMeta:
    """The stream after an access: a sliding TTL starts again (absolute expiry does not)."""
    return meta if meta.ttl_seconds is None else meta.evolve(last_access_ms=now_ms)


def same_config(existing: StreamMeta, command: CreateStream) -> bool:
    if command.fork is not None:
        return _same_fork(existing, command, command.fork)
    content_type = command.content_type or DEFAULT_CONTENT_TYPE
    return (
        existing.forked_from is None
        and content_types_match(existing.content_type, content_type)
        and existing.ttl_seconds == command.ttl_seconds
        and existing.expires_at_ms == command.expires_at_ms
        and existing.closed == command.closed
    )


def _same_fork(existing: StreamMeta, command: CreateStream, fork: ForkFrom) -> bool:
    """What a fork request leaves out (offset, content type, expiry) it inherits: any matches."""
    own_expiry = command.ttl_seconds is not None or command.expires_at_ms is not None
    expiry = (existing.ttl_seconds, existing.expires_at_ms)
    return (
        existing.forked_from == fork.source_id
        and existing.fork_sub_offset == fork.sub_offset
        and fork.offset in (None, existing.fork_offset)
        and (
            command.content_type is None
            or content_types_match(existing.content_type, command.content_type)
        )
        and (not own_expiry or expiry == (command.ttl_seconds, command.expires_at_ms))
        and existing.closed == command.closed
    )


def _append(view: View, command: Append, now_ms: int, limits: Limits) -> Write | Done:
    meta = view.stream
    if meta is not None and meta.soft_deleted:
        raise gone(command.ref.stream_id)
    if meta is None or meta.expired(now_ms):
        raise not_found(command.ref.stream_id)
    decision = None
    if command.producer is not None:
        decision = decide(view.producers.get(command.producer.producer_id), command.producer)
    if meta.closed:
        return Done(_closed_append(meta, command, decision))
    _check_body(meta, command)
    messages = _messages(meta.content_type, command.body, limits)
    if isinstance(decision, Duplicate):  # before Stream-Seq: a retry repeats its seq
        return Done(Appended(meta, False, ProducerState(decision.epoch, decision.last_seq)))
    _check_producer(decision)
    _check_order(meta, command)
    state = meta.evolve(
        closed=command.close,
        last_seq=command.seq or meta.last_seq,
        last_write_at_ms=now_ms,
        last_access_ms=now_ms if meta.ttl_seconds is not None else meta.last_access_ms,
        message_count=meta.message_count + len(messages),
    )
    closing = (ControlEvent.CLOSE,) if command.close else ()
    producer = None
    if isinstance(decision, Accepted) and command.producer is not None:
        producer = (command.producer.producer_id, decision.state)
    entries = (*(Message(m) for m in messages), *closing)
    return Write(entries, state, now_ms, producer=producer, stamp=command.producer)


def _closed_append(meta: StreamMeta, command: Append, decision: Decision | None) -> Appended:
    """On a closed stream only a repeat succeeds: a close-only, or the closing request's retry."""
    if isinstance(decision, Duplicate):
        return Appended(meta, False, ProducerState(decision.epoch, decision.last_seq))
    if isinstance(decision, StaleEpoch):
        _check_producer(decision)
    if command.close and not command.body and decision is None:
        return Appended(meta, appended=False)
    raise ProtocolError(
        ErrorCode.STREAM_CLOSED,
        f"stream {meta.stream_id!r} is closed",
        headers={"Stream-Closed": "true", "Stream-Next-Offset": encode(meta.next_offset)},
    )


def _check_body(meta: StreamMeta, command: Append) -> None:
    if not command.body and not command.close:
        raise ProtocolError(ErrorCode.EMPTY_BODY, "an append needs a body (or Stream-Closed: true)")
    if command.body:
        if command.content_type is None:
            raise ProtocolError(ErrorCode.BAD_REQUEST, "Content-Type is required with a body")
        if not content_types_match(meta.content_type, command.content_type):
            raise ProtocolError(
                ErrorCode.CONTENT_TYPE_MISMATCH,
                f"stream has Content-Type {meta.content_type!r}, not {command.content_type!r}",
            )


def _check_order(meta: StreamMeta, command: Append) -> None:
    if command.seq is not None and not seq_is_greater(command.seq, meta.last_seq):
        raise ProtocolError(
            ErrorCode.SEQUENCE_CONFLICT,
            f"Stream-Seq {command.seq!r} is not greater than {meta.last_seq!r}",
        )
    if command.if_match is not None and not if_match_matches(command.if_match, stream_etag(meta)):
        raise ProtocolError(ErrorCode.PRECONDITION_FAILED, "the stream changed (If-Match)")


def _check_producer(decision: Decision | None) -> None:
    """Raise the refusal a producer decision stands for (accepted and absent pass)."""
    if isinstance(decision, StaleEpoch):
        raise ProtocolError(
            ErrorCode.STALE_PRODUCER_EPOCH,
            f"producer epoch is stale: the current epoch is {decision.current_epoch}",
            headers={"Producer-Epoch": str(decision.current_epoch)},
        )
    if isinstance(decision, SequenceGap):
        raise ProtocolError(
            ErrorCode.PRODUCER_SEQUENCE_GAP,
            f"expected Producer-Seq {decision.expected}, got {decision.received}",
            headers={
                "Producer-Expected-Seq": str(decision.expected),
                "Producer-Received-Seq": str(decision.received),
            },
        )
    if isinstance(decision, EpochMustStartAtZero):
        raise ProtocolError(
            ErrorCode.INVALID_PRODUCER_EPOCH,
            f"a new producer epoch ({decision.epoch}) must start at Producer-Seq 0",
        )


def _messages(content_type: str, body: bytes, limits: Limits) -> list[bytes]:
    if not body:
        return []
    messages = json_mode.split_append(body) if is_json(content_type) else [body]
    return _within(messages, limits)


def _initial_messages(command: CreateStream, content_type: str, limits: Limits) -> list[bytes]:
    if is_json(content_type):
        return _within(json_mode.split_initial(command.body), limits)
    return [command.body] if command.body else []


def _within(messages: list[bytes], limits: Limits) -> list[bytes]:
    if len(messages) > limits.max_append_messages:
        raise ProtocolError(
            ErrorCode.PAYLOAD_TOO_LARGE,
            f"a JSON array of {len(messages)} messages; at most "
            f"{limits.max_append_messages} are written by one request",
        )
    return messages


def _last_message_index(entries: tuple[Entry, ...]) -> int | None:
    for index in range(len(entries) - 1, -1, -1):
        if isinstance(entries[index], Message):
            return index
    return None
