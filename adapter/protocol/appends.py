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
from adapter.protocol.steps import Done, Limits, Message, View, Write, gone, not_found
from adapter.protocol.stream_etags import stream_etag
from topology.wire import ControlEvent


def decide_append(view: View, command: Append, now_ms: int, limits: Limits) -> Write | Done:
    meta = view.stream
    if meta is not None and meta.soft_deleted:
        raise gone(command.ref.stream_id)
    if meta is None or meta.expired(now_ms):
        raise not_found(command.ref.stream_id)
    decision = None
    if command.producer is not None:
        decision = decide(view.producers.get(command.producer.producer_id), command.producer)
    # A producer's retry of an append already committed is that append, answered again as its
    # duplicate, even when a fence went up after it: only new appends are the fence's to refuse.
    if not isinstance(decision, Duplicate):
        check_fencing(meta, command.fencing_token)
    if meta.closed:
        return Done(_closed_append(meta, command, decision))
    _check_body(meta, command)
    messages = messages_of(meta.content_type, command.body, limits, command.split)
    if isinstance(decision, Duplicate):  # before Stream-Seq: a retry repeats its seq
        return Done(Appended(meta, False, decision.position))
    check_producer(decision)
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
        producer = (command.producer.producer_id, decision.position)
    entries = (*(Message(m) for m in messages), *closing)
    return Write(entries, state, now_ms, producer=producer, stamp=command.producer, seq=command.seq)


def check_fencing(meta: StreamMeta, token: str | None) -> None:
    """A fenced stream takes appends carrying its token only; one never fenced, those carrying
    none. The refusal says whether a token is set, never which: a fenced-out writer must not
    learn the token that fenced it."""
    if token == meta.fencing_token:
        return
    if meta.fencing_token is None:
        message = "the stream has no fencing token: send no Stream-Fencing-Token"
    elif token is None:
        message = "the stream has a fencing token: Stream-Fencing-Token is required"
    else:
        message = "the stream has a fencing token and Stream-Fencing-Token is not it"
    raise ProtocolError(ErrorCode.FENCING_TOKEN_MISMATCH, message)


def _closed_append(meta: StreamMeta, command: Append, decision: Decision | None) -> Appended:
    """On a closed stream only a repeat succeeds: a close-only, or the closing request's retry."""
    if isinstance(decision, Duplicate):
        return Appended(meta, False, decision.position)
    if isinstance(decision, StaleEpoch):
        check_producer(decision)
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


def check_producer(decision: Decision | None) -> None:
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


def messages_of(
    content_type: str, body: bytes, limits: Limits, split: json_mode.SplitBody | None = None
) -> list[bytes]:
    """The messages of an append's body; a JSON one's from `split` when it was split already."""
    if not body:
        return []
    if is_json(content_type):
        if split is not None:
            return split.result()
        return json_mode.split_append(body, limits.max_append_messages)
    return [body]


def initial_messages(command: CreateStream, content_type: str, limits: Limits) -> list[bytes]:
    if is_json(content_type):
        if command.split is not None and command.body:
            return command.split.result()
        return json_mode.split_initial(command.body, limits.max_append_messages)
    return [command.body] if command.body else []


def within(messages: list[bytes], limits: Limits) -> list[bytes]:
    """`messages` unless they are more than one request may write (a PUT's copied and
    initial messages together)."""
    if len(messages) > limits.max_append_messages:
        raise ProtocolError(
            ErrorCode.PAYLOAD_TOO_LARGE,
            f"{len(messages)} messages; at most {limits.max_append_messages} are written "
            "by one request",
        )
    return messages
