"""A stream's state carried forward over its own records in the partition: what a write slot's
new owner rebuilds from a checkpoint plus the records after it, as Kafka rebuilds a producer's
state from its snapshot and the log after it.

Every append leaves in its records all it changes in the stream's state (`topology/wire.py`):
each data record moves the tail past itself and counts one message, and carries the producer's
id, epoch and seq and the Stream-Seq its append named; a `close` record closes the stream. The
record's timestamp stands for the append's time. Lifecycle is not the log's to say here: a
`create` record other than the stream's own, or a `delete`, means the state carried forward is
of an incarnation that ended, and the stream's metadata record is to be asked instead.

A producer's (epoch, seq) only grows on a stream (a new epoch starts at seq 0), so a producer's
state is the greatest stamp seen, whichever record or checkpoint it came from.

Pure: no Kafka, no clock. Replaying records the state already reflects changes nothing, so a
scan may start anywhere at or below the state's tail.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from adapter.protocol.model import ProducerRecord, StreamMeta
from adapter.protocol.steps import Message, Write, accessed
from topology.wire import (
    CONTROL_HEADER,
    PRODUCER_EPOCH_HEADER,
    PRODUCER_ID_HEADER,
    PRODUCER_SEQ_HEADER,
    STREAM_SEQ_HEADER,
    ControlEvent,
    ProducerStamp,
    ReadHeaders,
    header_value,
)


class LoggedRecord(NamedTuple):
    """One of a stream's records as read from its partition."""

    offset: int
    timestamp_ms: int
    event: ControlEvent | None  # None: a data record
    producer: ProducerStamp | None = None
    stream_seq: str | None = None


def logged_record(offset: int, timestamp_ms: int, headers: ReadHeaders) -> LoggedRecord:
    """A record of the stream as its headers describe it (ValueError: headers no release
    writes, such as an unknown control event or a producer's epoch that is no number)."""
    event = header_value(headers, CONTROL_HEADER)
    stream_seq = header_value(headers, STREAM_SEQ_HEADER)
    return LoggedRecord(
        offset,
        timestamp_ms,
        None if event is None else ControlEvent(event.decode()),
        _stamp(headers),
        None if stream_seq is None else stream_seq.decode(),
    )


def logged_in_full(write: Write) -> bool:
    """Whether the write's records carry all it changes in its stream's state (a pure append:
    messages only, moving the tail, message count, Stream-Seq, last write and access and its
    producer's state): from format level 7 it commits them alone. A creation, a close, a
    deletion, a fork, a trim, a snapshot, a fence or a forgotten producer state writes its
    state records."""
    return (
        write.state is not None
        and bool(write.entries)
        and all(isinstance(entry, Message) for entry in write.entries)
        and not (write.creates or write.forget or write.collects or write.snapshot)
    )


def _stamp(headers: ReadHeaders) -> ProducerStamp | None:
    producer_id = header_value(headers, PRODUCER_ID_HEADER)
    epoch = header_value(headers, PRODUCER_EPOCH_HEADER)
    seq = header_value(headers, PRODUCER_SEQ_HEADER)
    if producer_id is None or epoch is None or seq is None:
        return None
    return ProducerStamp(producer_id.decode(), int(epoch), int(seq))


@dataclass(frozen=True)
class StreamState:
    """A stream's metadata and its producers' states (by producer id)."""

    meta: StreamMeta
    producers: Mapping[str, ProducerRecord] = field(default_factory=dict)


def carry_forward(state: StreamState, records: Iterable[LoggedRecord]) -> StreamState | None:
    """`state` once the stream's `records` (in offset order) are applied; None when they show
    the stream deleted or created anew after `state`."""
    meta = state.meta
    producers = dict(state.producers)
    for record in records:
        if record.event is ControlEvent.CREATE:
            if record.offset != meta.start_offset:
                return None
            continue
        if record.event is ControlEvent.DELETE:
            return None
        if record.producer is not None:
            _advance(producers, _producer(meta, record.producer, record.timestamp_ms))
        if record.event is None and record.offset < meta.next_offset:
            continue  # already counted in `state`
        if record.event is ControlEvent.CLOSE and meta.closed:
            continue  # a stream closes once: in `state` already, at its own time
        meta = _applied(meta, record)
    return StreamState(meta, producers)


def recover(
    meta: StreamMeta,
    producers: Mapping[str, ProducerRecord],
    checkpointed: StreamState | None,
    records: Iterable[LoggedRecord],
) -> StreamState | None:
    """A stream's state from its metadata record with the producer states stored beside it,
    its entry in the slot's checkpoint (None: none), and its records from the checkpoint's
    position on (from the metadata's tail without one). The metadata record says what the
    stream is; the checkpoint, when of the same incarnation and further on, where it stood."""
    base = StreamState(meta, producers)
    if checkpointed is not None and checkpointed.meta.start_offset == meta.start_offset:
        base = _merged(base, checkpointed)
    return carry_forward(base, records)


def _merged(base: StreamState, checkpointed: StreamState) -> StreamState:
    """The metadata record's stream at the checkpoint's tail when that is further on (a close
    moves no tail but is further on too); producers at the later of the two states."""
    meta, later = base.meta, checkpointed.meta
    if (later.next_offset, later.closed) > (meta.next_offset, meta.closed):
        meta = meta.evolve(
            next_offset=later.next_offset,
            message_count=later.message_count,
            last_seq=later.last_seq,
            last_write_at_ms=later.last_write_at_ms,
            last_access_ms=max(meta.last_access_ms, later.last_access_ms),
            closed=later.closed,
        )
    producers = dict(base.producers)
    for record in checkpointed.producers.values():
        _advance(producers, record)
    return StreamState(meta, producers)


def _advance(producers: dict[str, ProducerRecord], record: ProducerRecord) -> None:
    """Keep `record` unless the producer is known at a later (epoch, seq) already."""
    known = producers.get(record.producer_id)
    if known is None or (record.epoch, record.last_seq) > (known.epoch, known.last_seq):
        producers[record.producer_id] = record


def _applied(meta: StreamMeta, record: LoggedRecord) -> StreamMeta:
    """One record's changes, as `adapter/protocol/appends.py` decided them for its append."""
    at_ms = record.timestamp_ms
    changes: dict[str, object] = {
        "last_seq": record.stream_seq or meta.last_seq,
        "last_write_at_ms": at_ms,
    }
    if record.event is ControlEvent.CLOSE:
        changes["closed"] = True
    else:
        changes["next_offset"] = record.offset + 1
        changes["message_count"] = meta.message_count + 1
    return accessed(meta.evolve(**changes), at_ms)  # a write is an access


def _producer(meta: StreamMeta, stamp: ProducerStamp, at_ms: int) -> ProducerRecord:
    return ProducerRecord(
        meta.bucket_id, meta.stream_id, stamp.producer_id, stamp.epoch, stamp.seq, at_ms
    )
