"""A stream's write-side rules as one pure state machine: state and command in, a step out.

Every protocol rule decided when a stream changes lives here: content-type match, closure,
`Stream-Seq`, `If-Match` and `If-None-Match`, fencing tokens, idempotent producers (epoch and
seq), TTL and expiry (a read is an `Access`, which renews a sliding TTL), JSON flattening and
its limits, forks (what they inherit, `adapter/protocol/forks.py`), the soft deletion of a
stream its forks still read, snapshot publication with the retention it moves
(`adapter/protocol/snapshots.py`), and trims. It has one door: `Machine.apply` takes what a
command is decided against (a `View`), any `Command` and the time, and returns one `Step`
(`adapter/protocol/steps.py`: a write, a known reply, a refusal, a renewal, nothing to do, or:
decide again on committed state). A refusal is always returned, never raised; its HTTP status
is the edge's (`adapter/http/statuses.py`). The append rules are in
`adapter/protocol/appends.py`.

No asyncio, no Kafka, no HTTP, no clock: the caller passes the time and carries steps out.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, assert_never

from adapter.protocol import forks, snapshots
from adapter.protocol.appends import beyond_limit, decide_append, initial_messages
from adapter.protocol.caching import if_match_matches, if_none_match_matches
from adapter.protocol.commands import (
    Access,
    Append,
    Appended,
    Collect,
    Created,
    CreateStream,
    DeleteStream,
    Expire,
    Fence,
    ForkFrom,
    PublishSnapshot,
    Trim,
)
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.headers import content_types_match
from adapter.protocol.model import SnapshotPointer, StreamMeta
from adapter.protocol.offsets import encode, resolve_start
from adapter.protocol.steps import (
    DEFAULT_CONTENT_TYPE,
    DEFAULT_LIMITS,
    DEFAULT_MAX_APPEND_MESSAGES,
    NOTHING,
    SETTLE,
    Done,
    Entry,
    Limits,
    Message,
    Refused,
    Renewed,
    Step,
    View,
    Write,
    accessed,
    gone,
    message_offsets,
    not_found,
    renewal,
    settle,
)
from adapter.protocol.stream_etags import stream_etag
from adapter.protocol.trims import trimmed
from topology.wire import ControlEvent

# The steps are part of the machine's interface: its callers name them through it.
__all__ = [
    "DEFAULT_CONTENT_TYPE",
    "DEFAULT_LIMITS",
    "DEFAULT_MAX_APPEND_MESSAGES",
    "NOTHING",
    "SETTLE",
    "Command",
    "Done",
    "Entry",
    "Limits",
    "Machine",
    "Message",
    "Refused",
    "Renewed",
    "Step",
    "View",
    "Write",
    "gone",
    "message_offsets",
    "not_found",
    "renewal",
    "same_config",
    "settle",
]

# Everything the machine decides: what the HTTP edge asks, and what the sweeps and reads do.
Command = (
    CreateStream
    | Append
    | DeleteStream
    | Collect
    | Expire
    | PublishSnapshot
    | Access
    | Fence
    | Trim
)


@dataclass(frozen=True)
class Machine:
    """The stream rules with their configuration: `limits` on what one request may write, and
    `trim_settle_ms`, the grace period storage waits out after a trim (`trims.trimmed`)."""

    limits: Limits = DEFAULT_LIMITS
    trim_settle_ms: int = 0

    def apply(self, view: View, command: Command, now_ms: int) -> Step:
        """The one door: `command` decided against `view` at `now_ms`. Never raises a refusal."""
        match command:
            case CreateStream():
                return _create(view, command, now_ms, self.limits)
            case Append():
                return _append(view, command, now_ms, self.limits)
            case DeleteStream():
                return _delete(view, command.ref.stream_id, now_ms)
            case Collect():
                return _collect(view, now_ms)
            case Expire():
                return _expire(view, command.before_ms, now_ms)
            case PublishSnapshot():
                return _publish(view, command, now_ms, self.limits)
            case Access():
                return _access(view, command)
            case Fence():
                return _fence(view, command, now_ms)
            case Trim():
                return _trim(view, command, now_ms, self.trim_settle_ms)
            case _:
                assert_never(command)


# -- commands -------------------------------------------------------------------------------


def _create(view: View, command: CreateStream, now_ms: int, limits: Limits) -> Step:
    """Create a stream (or fork one); an existing one with the same configuration is a success.

    A plain stream goes to `view.partition`; a fork lives in its source's partition.
    """
    existing = view.stream
    if existing is not None and existing.soft_deleted:
        return Refused(
            ProtocolError(
                ErrorCode.STREAM_EXISTS,
                f"stream {existing.stream_id!r} was deleted while forks of it live on",
            )
        )
    live = existing if existing is not None and not existing.expired(now_ms) else None
    unmet = _unmet_condition(live, command)
    if unmet is not None:
        return Refused(unmet)
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
    messages = initial_messages(command, content_type, limits)
    if isinstance(messages, ProtocolError):
        return Refused(messages)
    expiry = (command.ttl_seconds, command.expires_at_ms)
    return _creation(view, command, now_ms, view.partition, content_type, messages, expiry)


def _unmet_condition(live: StreamMeta | None, command: CreateStream) -> ProtocolError | None:
    """A conditional PUT (RFC 9110 §13.1): `If-Match` needs the stream to exist with that ETag
    (`*`: to exist at all), `If-None-Match` needs it not to exist with one it names (`*`: not
    to exist at all). An expired stream does not exist."""
    current = None if live is None else stream_etag(live)
    if command.if_match is not None and (
        current is None or not if_match_matches(command.if_match, current)
    ):
        return ProtocolError(
            ErrorCode.PRECONDITION_FAILED, "the stream does not exist with that ETag (If-Match)"
        )
    if (
        command.if_none_match is not None
        and current is not None
        and if_none_match_matches(command.if_none_match, current)
    ):
        return ProtocolError(ErrorCode.PRECONDITION_FAILED, "the stream exists (If-None-Match)")
    return None


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
    start = _fork_start(view, command, fork, content_type, limits)
    if isinstance(start, ProtocolError):
        return Refused(start)
    at, inherited_snapshot, messages = start
    own_expiry = command.ttl_seconds is not None or command.expires_at_ms is not None
    ttl, expires_at = (
        (command.ttl_seconds, command.expires_at_ms)
        if own_expiry
        else (source.ttl_seconds, source.expires_at_ms)  # no expiry of its own: inherited
    )
    own_bucket = command.ref.bucket_id
    lineage = {
        "forked_from": source.stream_id,
        "source_bucket": None if source.bucket_id == own_bucket else source.bucket_id,
        # Its records go where its source's are: its source's partition, of its topic.
        "home": None if source.data_bucket == own_bucket else source.data_bucket,
        "fork_offset": source.next_offset if fork.offset is None else fork.offset,
        "fork_sub_offset": fork.sub_offset,
        "inherited": forks.inherited(source, at),
        "retained_from": source.retained_from,
        "trimmed_to": source.trimmed_to,
        "trimmed_at_ms": source.trimmed_at_ms,
        "trim_settled_to": source.trim_settled_to,
        "trim_settling_to": source.trim_settling_to,
        "trim_settling_at_ms": source.trim_settling_at_ms,
    }
    expiry = (ttl, expires_at)
    write = _creation(
        view, command, now_ms, source.partition, content_type, messages, expiry, lineage
    )
    if inherited_snapshot is None:
        return write
    snapshot = replace(
        inherited_snapshot,
        bucket_id=command.ref.bucket_id,
        stream_id=command.ref.stream_id,
        stream_created_at_ms=now_ms,
    )
    return replace(write, snapshot=snapshot)


def _fork_start(
    view: View, command: CreateStream, fork: ForkFrom, content_type: str, limits: Limits
) -> tuple[int, SnapshotPointer | None, list[bytes]] | ProtocolError:
    """Where a fork's inheritance ends, the snapshot it inherits, and its first messages (those
    it copies, then its own); or the refusal of any of them."""
    source = view.source
    assert source is not None
    at = forks.cut(source, fork.offset)
    if isinstance(at, ProtocolError):
        return at
    snapshot = forks.retained(source, view.source_snapshot, at)
    if isinstance(snapshot, ProtocolError):
        return snapshot
    copied = forks.taken(source.content_type, view.following, fork.sub_offset)
    if isinstance(copied, ProtocolError):
        return copied
    initial = initial_messages(command, content_type, limits)
    if isinstance(initial, ProtocolError):
        return initial
    messages = [*copied, *initial]
    return beyond_limit(messages, limits) or (at, snapshot, messages)


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


def _append(view: View, command: Append, now_ms: int, limits: Limits) -> Step:
    """Append (and perhaps close): write, repeat, or refuse. Decided on committed state, the
    append is first an access of a live stream, whatever its answer: its sliding TTL starts
    again (the step's `renewed`), and the append is decided on the stream so renewed."""
    if view.pending:
        return _pending_append(view, command, now_ms, limits)
    meta = view.stream
    renewed = None if meta is None or meta.expired(now_ms) else accessed(meta, now_ms)
    if renewed is None or renewed is meta:
        return decide_append(view, command, now_ms, limits)
    step = decide_append(replace(view, stream=renewed), command, now_ms, limits)
    return replace(step, renewed=renewed)


def _pending_append(view: View, command: Append, now_ms: int, limits: Limits) -> Step:
    """An append decided on the state queued appends will leave: only an acceptance with data
    is; anything else is decided again on committed state (SETTLE)."""
    if view.broken or command.if_match is not None:
        return SETTLE
    step = decide_append(view, command, now_ms, limits)
    if not isinstance(step, Write):  # a refusal, or a repeat
        return SETTLE
    if not step.messages:
        return SETTLE  # no record of its own tells where its tail is: the committed one does
    return step


def _delete(view: View, stream_id: str, now_ms: int) -> Step:
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


def _collect(view: View, now_ms: int) -> Step:
    """Forget a soft-deleted stream none of whose forks is live any more (they expired), and
    the soft-deleted ancestors that were waiting only for it; NOTHING when it is not such a
    stream. Its delete record was written when it was soft-deleted."""
    meta = view.stream
    if meta is None or not meta.soft_deleted or view.forks:
        return NOTHING
    return Write((), None, now_ms, collects=_collected(view))


def _expire(view: View, before_ms: int, now_ms: int) -> Step:
    """Forget a stream that expired before `before_ms` (its state, snapshot pointer and
    producer states: tombstones), or NOTHING when it is not such a stream. One that live forks
    still read stays (it answers 404 like any expired stream; its records stay theirs), and
    so do the soft-deleted ancestors of one that goes: the soft-delete sweep decides them."""
    meta = view.stream
    if meta is None or meta.soft_deleted or view.forks:
        return NOTHING
    deadline = meta.deadline_ms()
    if deadline is None or deadline >= before_ms:
        return NOTHING
    return Write((), None, now_ms, forget=tuple(view.producers))


def _publish(view: View, command: PublishSnapshot, now_ms: int, limits: Limits) -> Step:
    """Publish a snapshot: its pointer, and the earliest retained offset moved to it, commit
    together, with no record in the stream's partition. Decided on committed state."""
    meta = _settled_stream(view, command.ref.stream_id, now_ms)
    if not isinstance(meta, StreamMeta):
        return meta
    refusal = snapshots.publish_refusal(meta, command, limits.max_snapshot_bytes, now_ms)
    if refusal is not None:
        return Refused(refusal)
    state = meta.evolve(retained_from=command.offset)
    return Write((), state, now_ms, snapshot=snapshots.pointer(meta, command, now_ms))


def _access(view: View, command: Access) -> Step:
    """A read (or write) of the stream at `command.at_ms`: a sliding TTL starts again from it;
    NOTHING when there is nothing to do (no stream, no sliding TTL: an absolute `Expires-At` does
    not move, or an access at least as recent is known already, so accesses told late or out of
    order never shorten a stream's life).

    Expiry is not judged here: a read served here was refused already if the stream had
    expired, and an access its owner reports counts even where the stream looked expired (the
    owner decides expiry).
    """
    meta = view.stream
    renewed = None if meta is None else accessed(meta, command.at_ms)
    return NOTHING if renewed is None or renewed is meta else Renewed(renewed)


def _fence(view: View, command: Fence, now_ms: int) -> Step:
    """Set the token later appends must carry (`adapter/protocol/appends.py` checks it). Only
    the stream's state changes, in the same transaction as any other change to it and with no
    record in its partition; decided on committed state, so appends queued before it commit
    under the old token and every one decided after it sees the new one."""
    meta = _settled_stream(view, command.ref.stream_id, now_ms)
    if not isinstance(meta, StreamMeta):
        return meta
    if meta.fencing_token == command.token:
        return Done(Appended(meta, appended=False))
    return Write((), meta.evolve(fencing_token=command.token), now_ms)


def _trim(view: View, command: Trim, now_ms: int, settle_ms: int) -> Step:
    """Make the stream's messages below `command.before` unreadable: its earliest offset moves
    there, in its state alone (no record in its partition), and reads below answer 410 with
    `Stream-Earliest-Offset`; storage follows (`snapshots.needed_from`). A trim never moves
    the earliest offset back: one at or below it changes nothing. Past the tail is refused
    rather than clamped: the caller named a position the stream never had. Decided on
    committed state, so every append queued before it is there to be trimmed. `settle_ms` is
    the grace period storage waits out (`trims.trimmed`)."""
    meta = _settled_stream(view, command.ref.stream_id, now_ms)
    if not isinstance(meta, StreamMeta):
        return meta
    before = resolve_start(meta, command.before)
    if before > meta.next_offset:
        return Refused(
            ProtocolError(
                ErrorCode.TRIM_BEYOND_TAIL,
                f"trim point {encode(before)} is past the tail {encode(meta.next_offset)}",
            )
        )
    if before <= meta.earliest_offset:
        return Done(Appended(meta, appended=False))
    return Write((), trimmed(meta, before, now_ms, settle_ms), now_ms)


def _collected(view: View) -> tuple[tuple[str, str], ...]:
    """The soft-deleted ancestors whose last live fork is going (nearest first)."""
    collected: list[tuple[str, str]] = []
    for ancestor, live_forks in view.ancestors:
        if not ancestor.soft_deleted or live_forks > 1:
            break
        collected.append((ancestor.bucket_id, ancestor.stream_id))
    return tuple(collected)


# -- rules ----------------------------------------------------------------------------------


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
        existing.source == fork.source_of(command.ref)
        and existing.fork_sub_offset == fork.sub_offset
        and fork.offset in (None, existing.fork_offset)
        and (
            command.content_type is None
            or content_types_match(existing.content_type, command.content_type)
        )
        and (not own_expiry or expiry == (command.ttl_seconds, command.expires_at_ms))
        and existing.closed == command.closed
    )


def _settled_stream(view: View, stream_id: str, now_ms: int) -> StreamMeta | Step:
    """The stream a change of its state alone (a publish, a fence, a trim) applies to, decided
    on committed state: SETTLE while appends are in flight, else the refusal of a stream that
    is gone or not there."""
    if view.pending:
        return SETTLE
    meta = view.stream
    if meta is not None and meta.soft_deleted:
        return Refused(gone(stream_id))
    if meta is None or meta.expired(now_ms):
        return Refused(not_found(stream_id))
    return meta
