"""A stream's state carried forward over its own records in the partition: what a write slot's
new owner rebuilds from a checkpoint plus the records after it, as Kafka rebuilds a producer's
state from its snapshot and the log after it.

Every append leaves in its records all it changes in the stream's state (`topology/wire.py`):
each data record moves the tail past itself and counts one message, and carries the producer's
id, epoch and seq and the Stream-Seq its append named; a `close` record closes the stream. The
record's timestamp stands for the append's time. Lifecycle is not the log's to say here: a
`create` record other than the stream's own, or a `delete`, means the state carried forward is
of an incarnation that ended, and the stream's metadata record is to be asked instead.

Pure: no Kafka, no clock. Replaying records the state already reflects changes nothing, so a
scan may start anywhere at or below the state's tail.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from adapter.protocol.model import ProducerRecord, StreamMeta
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
        if record.event is None and record.offset < meta.next_offset:
            continue  # already counted in `state`
        meta = _applied(meta, record)
        if record.producer is not None:
            stamp = record.producer
            producers[stamp.producer_id] = _producer(meta, stamp, record.timestamp_ms)
    return StreamState(meta, producers)


def _applied(meta: StreamMeta, record: LoggedRecord) -> StreamMeta:
    """One record's changes, as `adapter/protocol/appends.py` decided them for its append."""
    at_ms = record.timestamp_ms
    changes: dict[str, object] = {
        "last_seq": record.stream_seq or meta.last_seq,
        "last_write_at_ms": at_ms,
        "last_access_ms": at_ms if meta.ttl_seconds is not None else meta.last_access_ms,
    }
    if record.event is ControlEvent.CLOSE:
        changes["closed"] = True
    else:
        changes["next_offset"] = record.offset + 1
        changes["message_count"] = meta.message_count + 1
    return meta.evolve(**changes)


def _producer(meta: StreamMeta, stamp: ProducerStamp, at_ms: int) -> ProducerRecord:
    return ProducerRecord(
        meta.bucket_id, meta.stream_id, stamp.producer_id, stamp.epoch, stamp.seq, at_ms
    )
