"""The format of what we write to the bucket topics: keys, headers, control records, offset tokens.

This module is its one home. The adapter builds records with it
(`adapter/service/record_encoding.py`), skips control records by it when reading
(`adapter/log/reader.py`) and spells positions with its tokens (`adapter/protocol/offsets.py`);
`spark_streaming` decodes the same records in Spark SQL from these names and this width. It
imports the standard library only, so a Spark job (or any other reader of the topics) gets the
format without confluent-kafka or aiohttp.

A record's key is its stream id in UTF-8 (a fork housed in another bucket's topic: its bucket
and id joined by `//`, see `housed_key`). A data record's value is exactly the bytes appended,
with a `content-type` header, when the append named a producer, `producer-id`,
`producer-epoch` and `producer-seq`, and when it named a Stream-Seq, `stream-seq`: all a
stream's state learns from an append is in its records. A control record has an empty value and
a `dk-control` header naming the lifecycle event (the `close` record of an append also carries
the append's producer and Stream-Seq headers); data records never carry that header. Every
record of an
append that another instance forwarded to the slot's owner also carries `dk-forward`, an id
the forwarding instance made: if the owner dies before answering, the forwarder looks for it
in the partition to learn whether the append was written (`adapter/log/outcomes.py`).
With tracing on, every record a request writes (an append's data, a creation's, closure's,
fork's, trim's or deletion's control record) also carries `traceparent`: the W3C trace context
of the Kafka transaction that wrote it, so a consumer continues the request's trace.
Readers ignore headers they do not know.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Final, NamedTuple, TypeAlias

CONTROL_HEADER: Final = "dk-control"
CONTENT_TYPE_HEADER: Final = "content-type"
# On data records appended with Producer-Id/Epoch/Seq: who wrote them, for Kafka consumers.
PRODUCER_ID_HEADER: Final = "producer-id"
PRODUCER_EPOCH_HEADER: Final = "producer-epoch"
PRODUCER_SEQ_HEADER: Final = "producer-seq"
# On data records appended with Stream-Seq: the seq the append named.
STREAM_SEQ_HEADER: Final = "stream-seq"
# On every record of a forwarded append: the forwarding instance's id for that request.
FORWARD_HEADER: Final = "dk-forward"
# With tracing on, on every record a request writes: its transaction's W3C trace context.
TRACE_HEADER: Final = "traceparent"

HeaderValue: TypeAlias = str | bytes | None
# Headers as we hand them to a producer: (name, value) pairs, in order.
Headers: TypeAlias = list[tuple[str, HeaderValue]]
# Headers as Kafka clients hand them back: pairs (or a dict), None when the record has none.
ReadHeaders: TypeAlias = Sequence[tuple[str, HeaderValue]] | Mapping[str, HeaderValue] | None


class ControlEvent(StrEnum):
    """The value of a control record's `dk-control` header."""

    CREATE = "create"
    CLOSE = "close"
    DELETE = "delete"


class ProducerStamp(NamedTuple):
    """The Producer-Id/Epoch/Seq of an append (spec §5.2.1): as its request named them, and as
    written on each of its records."""

    producer_id: str
    epoch: int
    seq: int


def stream_key(stream_id: str) -> bytes:
    """The record key of every record of a stream (and the key placement hashes)."""
    return stream_id.encode()


# Between a housed stream's bucket and id in its record key. No stream id holds an empty path
# segment (the bucketed surface refuses '/', the flat one empty segments), so a key with `//`
# is never an id of the bucket whose topic holds it, and its bucket (never with '/') comes first.
HOUSED_SEPARATOR: Final = "//"


def housed_key(bucket_id: str, stream_id: str, home: str | None) -> str:
    """The record key of a stream's own records: its id in its own bucket's topic, else
    `{bucket}//{id}`, so it cannot meet the keys of the streams of the bucket housing it."""
    return stream_id if home is None else f"{bucket_id}{HOUSED_SEPARATOR}{stream_id}"


def owner_of_key(data_bucket: str, record_id: str) -> tuple[str, str]:
    """(bucket, stream) whose records are keyed `record_id` in `data_bucket`'s topic."""
    bucket_id, separator, stream_id = record_id.partition(HOUSED_SEPARATOR)
    return (bucket_id, stream_id) if separator else (data_bucket, record_id)


def data_headers(
    content_type: str, producer: ProducerStamp | None = None, stream_seq: str | None = None
) -> Headers:
    """The headers of each data record of one append: with what the stream's state learns from
    it beyond the records themselves, so that state can be rebuilt from the partition."""
    return [(CONTENT_TYPE_HEADER, content_type.encode()), *stamp_headers(producer, stream_seq)]


def stamp_headers(producer: ProducerStamp | None, stream_seq: str | None) -> Headers:
    """The producer and Stream-Seq of an append, on each of its records (its `close` record
    too: a close-only append's producer state and Stream-Seq are in no data record)."""
    headers: Headers = []
    if producer is not None:
        headers += [
            (PRODUCER_ID_HEADER, producer.producer_id.encode()),
            (PRODUCER_EPOCH_HEADER, str(producer.epoch).encode()),
            (PRODUCER_SEQ_HEADER, str(producer.seq).encode()),
        ]
    if stream_seq is not None:
        headers.append((STREAM_SEQ_HEADER, stream_seq.encode()))
    return headers


def control_headers(event: ControlEvent) -> Headers:
    """The headers of a lifecycle record; its value is empty."""
    return [(CONTROL_HEADER, event.value.encode())]


def header_value(headers: ReadHeaders, name: str) -> bytes | None:
    """The first value of header `name`; None when the record has none (or it has no value)."""
    for key, value in _pairs(headers):
        if key == name:
            return value.encode() if isinstance(value, str) else value
    return None


def is_control(headers: ReadHeaders) -> bool:
    """Lifecycle records carry the control header; data records never do."""
    return any(key == CONTROL_HEADER for key, _ in _pairs(headers))


def header_bytes(headers: ReadHeaders) -> int:
    """How many bytes the headers' names and values take."""
    return sum(len(key) + len(value or b"") for key, value in _pairs(headers))


def _pairs(headers: ReadHeaders) -> Sequence[tuple[str, HeaderValue]]:
    if headers is None:
        return ()
    return list(headers.items()) if isinstance(headers, Mapping) else headers


# Offset tokens: the Kafka offset in the stream's partition as 32 decimal digits in two groups of
# 16, `HHHHHHHHHHHHHHHH_LLLLLLLLLLLLLLLL` (offset = H * 10**16 + L). Every non-negative 64-bit
# offset fits and lexicographic order is numeric order; `adapter/protocol/offsets.py` says why.
TOKEN_GROUP_DIGITS: Final = 16
TOKEN_SEPARATOR: Final = "_"
MAX_KAFKA_OFFSET: Final = 2**63 - 1  # Kafka offsets are signed 64-bit
_GROUP: Final = 10**TOKEN_GROUP_DIGITS
_GROUP_PATTERN: Final = f"([0-9]{{{TOKEN_GROUP_DIGITS}}})"  # [0-9], not \d: no other digits
_TOKEN: Final = re.compile(_GROUP_PATTERN + TOKEN_SEPARATOR + _GROUP_PATTERN)


def encode_token(kafka_offset: int) -> str:
    """The token of a Kafka offset."""
    if not 0 <= kafka_offset <= MAX_KAFKA_OFFSET:
        raise ValueError(f"Kafka offset {kafka_offset} is outside 0..2**63-1")
    high, low = divmod(kafka_offset, _GROUP)
    return f"{high:0{TOKEN_GROUP_DIGITS}d}{TOKEN_SEPARATOR}{low:0{TOKEN_GROUP_DIGITS}d}"


def decode_token(token: str) -> int:
    """The Kafka offset a token names; ValueError if it is no token or names no Kafka offset."""
    match = _TOKEN.fullmatch(token)
    if match is None:
        raise ValueError(f"is not two groups of {TOKEN_GROUP_DIGITS} digits joined by '_'")
    kafka_offset = int(match[1]) * _GROUP + int(match[2])
    if kafka_offset > MAX_KAFKA_OFFSET:
        raise ValueError("is beyond any Kafka offset")
    return kafka_offset
