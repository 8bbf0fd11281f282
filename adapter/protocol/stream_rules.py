"""The rules an append or a create must pass, decided against the stream's state alone.

Pure: no Kafka, no HTTP. Each raises the ProtocolError the request gets, in the order the
protocol gives them precedence.
"""

from __future__ import annotations

from adapter.protocol import json_mode
from adapter.protocol.caching import etag, if_match_matches
from adapter.protocol.commands import Append, Appended, CreateStream
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.headers import content_types_match, is_json, seq_is_greater
from adapter.protocol.offsets import encode
from adapter.protocol.producers import (
    Decision,
    Duplicate,
    EpochMustStartAtZero,
    ProducerState,
    SequenceGap,
    StaleEpoch,
)
from adapter.state.records import StreamMeta


def stream_etag(meta: StreamMeta) -> str:
    """The stream's current ETag (If-Match on append compares against it)."""
    return range_etag(meta, meta.start_offset, meta.next_offset, meta.closed)


def range_etag(meta: StreamMeta, start: int, end: int, closed: bool) -> str:
    """The ETag of the stream's bytes in [start, end); a stream recreated under the same name
    starts at another offset, so its tags never collide with the old one's."""
    internal = f"{meta.bucket_id}/{meta.stream_id}@{meta.start_offset}"
    return etag(internal, encode(start), encode(end), closed)


def check_same_config(existing: StreamMeta, command: CreateStream) -> None:
    same = (
        content_types_match(existing.content_type, command.content_type)
        and existing.ttl_seconds == command.ttl_seconds
        and existing.expires_at_ms == command.expires_at_ms
        and existing.closed == command.closed
    )
    if not same:
        raise ProtocolError(
            ErrorCode.STREAM_EXISTS,
            f"stream {existing.stream_id!r} exists with another configuration",
        )


def closed_append(meta: StreamMeta, command: Append, decision: Decision | None) -> Appended:
    """On a closed stream only a repeat succeeds: a close-only, or the closing request's retry."""
    if isinstance(decision, Duplicate):
        return Appended(meta, False, ProducerState(decision.epoch, decision.last_seq))
    if isinstance(decision, StaleEpoch):
        check_producer(decision)
    if command.close and not command.body and decision is None:
        return Appended(meta, appended=False)
    raise ProtocolError(
        ErrorCode.STREAM_CLOSED,
        f"stream {meta.stream_id!r} is closed",
        headers={"Stream-Closed": "true", "Stream-Next-Offset": encode(meta.next_offset)},
    )


def check_body(meta: StreamMeta, command: Append) -> None:
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


def check_order(meta: StreamMeta, command: Append) -> None:
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


def split_messages(content_type: str, body: bytes) -> list[bytes]:
    if not body:
        return []
    return json_mode.split_append(body) if is_json(content_type) else [body]
