"""The append rules of the stream state machine: fencing tokens, content type, closure,
`Stream-Seq`, `If-Match`, idempotent producers (epoch and seq) and JSON flattening with its
limits."""

from __future__ import annotations

from adapter.protocol import json_mode
from adapter.protocol.caching import if_match_matches
from adapter.protocol.commands import Append, Appended, CreateStream
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.headers import content_types_match, is_json, seq_is_greater
from adapter.protocol.model import StreamMeta
from adapter.protocol.offsets import encode
from adapter.protocol.producers import (
    Accepted,
    Decision,
    Duplicate,
    EpochMustStartAtZero,
    SequenceGap,
    StaleEpoch,
    decide,
)
from adapter.protocol.steps import (
    Done,
    Limits,
    Message,
    Refused,
    View,
    Write,
    accessed,
    gone,
    not_found,
)
from adapter.protocol.stream_etags import stream_etag
from topology.wire import ControlEvent


def decide_append(
    view: View, command: Append, now_ms: int, limits: Limits
) -> Write | Done | Refused:
    meta = view.stream
    if meta is not None and meta.soft_deleted:
        return Refused(gone(command.ref.stream_id))
    if meta is None or meta.expired(now_ms):
        return Refused(not_found(command.ref.stream_id))
    decision = None
    if command.producer is not None:
        decision = decide(view.producers.get(command.producer.producer_id), command.producer)
    # A producer's retry of an append already committed is that append, answered again as its
    # duplicate, even when a fence went up after it: only new appends are the fence's to refuse.
    fenced = None if isinstance(decision, Duplicate) else fencing_refusal(meta, command)
    if fenced is not None:
        return Refused(fenced)
    if meta.closed:
        return _closed_append(meta, command, decision)
    return _open_append(meta, command, now_ms, limits, decision)


def _open_append(
    meta: StreamMeta, command: Append, now_ms: int, limits: Limits, decision: Decision | None
) -> Write | Done | Refused:
    """An append to an open stream: its body checked and split, then its order."""
    refusal = _body_refusal(meta, command)
    if refusal is not None:
        return Refused(refusal)
    messages = messages_of(meta.content_type, command.body, limits, command.split)
    if isinstance(messages, ProtocolError):
        return Refused(messages)
    if isinstance(decision, Duplicate):  # before Stream-Seq: a retry repeats its seq
        return Done(Appended(meta, False, decision.position))
    refusal = producer_refusal(decision) or _order_refusal(meta, command)
    if refusal is not None:
        return Refused(refusal)
    return _write(meta, command, now_ms, decision, messages)


def _write(
    meta: StreamMeta, command: Append, now_ms: int, decision: Decision | None, messages: list[bytes]
) -> Write:
    """The accepted append: its messages (and `close` record), and the state they leave."""
    state = meta.evolve(
        closed=command.close,
        last_seq=command.seq or meta.last_seq,
        last_write_at_ms=now_ms,
        message_count=meta.message_count + len(messages),
    )
    closing = (ControlEvent.CLOSE,) if command.close else ()
    producer = None
    if isinstance(decision, Accepted) and command.producer is not None:
        producer = (command.producer.producer_id, decision.position)
    entries = (*(Message(m) for m in messages), *closing)
    return Write(
        entries,
        accessed(state, now_ms),  # a write is an access
        now_ms,
        producer=producer,
        stamp=command.producer,
        seq=command.seq,
    )


def fencing_refusal(meta: StreamMeta, command: Append) -> ProtocolError | None:
    """A fenced stream takes appends carrying its token only; one never fenced, those carrying
    none. The refusal says whether a token is set, never which: a fenced-out writer must not
    learn the token that fenced it."""
    token = command.fencing_token
    if token == meta.fencing_token:
        return None
    if meta.fencing_token is None:
        message = "the stream has no fencing token: send no Stream-Fencing-Token"
    elif token is None:
        message = "the stream has a fencing token: Stream-Fencing-Token is required"
    else:
        message = "the stream has a fencing token and Stream-Fencing-Token is not it"
    return ProtocolError(ErrorCode.FENCING_TOKEN_MISMATCH, message)


def _closed_append(meta: StreamMeta, command: Append, decision: Decision | None) -> Done | Refused:
    """On a closed stream only a repeat succeeds: a close-only, or the closing request's retry."""
    if isinstance(decision, Duplicate):
        return Done(Appended(meta, False, decision.position))
    stale = producer_refusal(decision) if isinstance(decision, StaleEpoch) else None
    if stale is not None:
        return Refused(stale)
    if command.close and not command.body and decision is None:
        return Done(Appended(meta, appended=False))
    return Refused(
        ProtocolError(
            ErrorCode.STREAM_CLOSED,
            f"stream {meta.stream_id!r} is closed",
            headers={"Stream-Closed": "true", "Stream-Next-Offset": encode(meta.next_offset)},
        )
    )


def _body_refusal(meta: StreamMeta, command: Append) -> ProtocolError | None:
    if not command.body and not command.close:
        return ProtocolError(
            ErrorCode.EMPTY_BODY, "an append needs a body (or Stream-Closed: true)"
        )
    if not command.body:
        return None
    if command.content_type is None:
        return ProtocolError(ErrorCode.BAD_REQUEST, "Content-Type is required with a body")
    if not content_types_match(meta.content_type, command.content_type):
        return ProtocolError(
            ErrorCode.CONTENT_TYPE_MISMATCH,
            f"stream has Content-Type {meta.content_type!r}, not {command.content_type!r}",
        )
    return None


def _order_refusal(meta: StreamMeta, command: Append) -> ProtocolError | None:
    if command.seq is not None and not seq_is_greater(command.seq, meta.last_seq):
        return ProtocolError(
            ErrorCode.SEQUENCE_CONFLICT,
            f"Stream-Seq {command.seq!r} is not greater than {meta.last_seq!r}",
        )
    if command.if_match is not None and not if_match_matches(command.if_match, stream_etag(meta)):
        return ProtocolError(ErrorCode.PRECONDITION_FAILED, "the stream changed (If-Match)")
    return None


def producer_refusal(decision: Decision | None) -> ProtocolError | None:
    """The refusal a producer decision stands for (None: accepted, a duplicate, or no producer)."""
    if isinstance(decision, StaleEpoch):
        return ProtocolError(
            ErrorCode.STALE_PRODUCER_EPOCH,
            f"producer epoch is stale: the current epoch is {decision.current_epoch}",
            headers={"Producer-Epoch": str(decision.current_epoch)},
        )
    if isinstance(decision, SequenceGap):
        return ProtocolError(
            ErrorCode.PRODUCER_SEQUENCE_GAP,
            f"expected Producer-Seq {decision.expected}, got {decision.received}",
            headers={
                "Producer-Expected-Seq": str(decision.expected),
                "Producer-Received-Seq": str(decision.received),
            },
        )
    if isinstance(decision, EpochMustStartAtZero):
        return ProtocolError(
            ErrorCode.INVALID_PRODUCER_EPOCH,
            f"a new producer epoch ({decision.epoch}) must start at Producer-Seq 0",
        )
    return None


def messages_of(
    content_type: str, body: bytes, limits: Limits, split: json_mode.SplitBody | None = None
) -> list[bytes] | ProtocolError:
    """The messages of an append's body (a JSON one's from `split` when it was split already),
    or the refusal of a body that holds none."""
    if not body:
        return []
    if not is_json(content_type):
        return [body]
    try:
        if split is not None:
            return split.result()
        return json_mode.split_append(body, limits.max_append_messages)
    except ProtocolError as error:  # the JSON splitter's refusal, as this rule's answer
        return error


def initial_messages(
    command: CreateStream, content_type: str, limits: Limits
) -> list[bytes] | ProtocolError:
    """A creation's initial messages, or the refusal of a body that holds none."""
    if not is_json(content_type):
        return [command.body] if command.body else []
    try:
        if command.split is not None and command.body:
            return command.split.result()
        return json_mode.split_initial(command.body, limits.max_append_messages)
    except ProtocolError as error:  # the JSON splitter's refusal, as this rule's answer
        return error


def beyond_limit(messages: list[bytes], limits: Limits) -> ProtocolError | None:
    """The refusal of more messages than one request may write (a PUT's copied and initial
    messages together)."""
    if len(messages) <= limits.max_append_messages:
        return None
    return ProtocolError(
        ErrorCode.PAYLOAD_TOO_LARGE,
        f"{len(messages)} messages; at most {limits.max_append_messages} are written "
        "by one request",
    )
