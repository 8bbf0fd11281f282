"""Whether a transaction whose commit had no definite answer committed after all.

A commit can fail in a way that says nothing about its outcome: the EndTxn request timed out,
the connection dropped after the coordinator wrote the commit, the producer was fenced in the
middle. Answering such a request 503 would be a lie if it committed (the client's retry would
write it twice), and answering 2xx a lie if it did not. So the writer finds out: once a
producer with the same transactional id has been initialised (which completes a commit the
coordinator accepted and aborts anything else), the transaction is over, and a
`read_committed` consumer positioned at one of its records either returns that record
(committed) or skips past it (aborted).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from topology.kafka_client import KafkaAccess
from topology.wire import CONTROL_HEADER, FORWARD_HEADER, ControlEvent, header_value, is_control

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Probe:
    """One record of the transaction, where Kafka acknowledged it."""

    topic: str
    partition: int
    offset: int


def _consumer(kafka: KafkaAccess, extra: dict[str, Any] | None = None) -> Consumer:
    """An assign-only `read_committed` consumer that reports the end of a partition."""
    owned: dict[str, Any] = {
        "group.id": kafka.group("outcome", unique=True),  # never joined
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "enable.partition.eof": True,
    }
    return kafka.consumer(kafka.config(owned | (extra or {}), "librdkafka.outcome"))


def committed(kafka: KafkaAccess, probe: Probe, timeout_s: float) -> bool | None:
    """True if the probe's record is committed, False if aborted, None if not known yet
    (the transaction is still open, or the broker did not answer in time)."""
    consumer = _consumer(kafka)
    try:
        consumer.assign([TopicPartition(probe.topic, probe.partition, probe.offset)])
        return _first_answer(consumer, probe, time.monotonic() + timeout_s)
    except KafkaException as error:
        log.warning("checking the outcome at %s: %s", probe, error)
        return None
    finally:
        consumer.close()


def _first_answer(consumer: Consumer, probe: Probe, deadline: float) -> bool | None:
    while (remaining := deadline - time.monotonic()) > 0:
        message = consumer.poll(min(remaining, 0.5))
        if message is None:
            continue
        error = message.error()
        offset = message.offset() or 0
        if error is None:
            return offset == probe.offset  # read_committed skips an aborted record
        if error.code() != KafkaError._PARTITION_EOF:
            raise KafkaException(error)
        if offset > probe.offset:  # the stable end is past the record, which was skipped
            return False
    return None


@dataclass(frozen=True)
class Forwarded:
    """What a forwarded append left in its partition, found by its forward id."""

    written: bool
    last_data: int | None  # the offset of its last data record (None: it wrote none)
    closed: bool  # it wrote the stream's close record
    tail: int  # the stream's next offset once it was written (meaningful when `written`)


def forwarded(
    kafka: KafkaAccess,
    where: Probe,
    key: bytes,
    forward_id: str,
    timeout_s: float,
) -> Forwarded | None:
    """Whether a forwarded append is in the log: its records carry `forward_id` and sit at or
    after `where` (the stream's tail as the forwarder knew it, so before the append).

    Call it only once every earlier holder of the slot's transactional id is fenced: then no
    transaction of theirs is still open, and reading `read_committed` up to the high watermark
    seen at the start gives the final answer. None if the broker did not let it finish in time.
    """
    # A tail below the log start (freed since): the append is above it.
    consumer = _consumer(kafka, {"auto.offset.reset": "earliest"})
    try:
        part = TopicPartition(where.topic, where.partition)
        _, high = consumer.get_watermark_offsets(part, timeout_s, cached=False)
        consumer.assign([TopicPartition(where.topic, where.partition, where.offset)])
        return _search(consumer, key, forward_id.encode(), where.offset, high, timeout_s)
    except KafkaException as error:
        log.warning("looking for forwarded append %s at %s: %s", forward_id, where, error)
        return None
    finally:
        consumer.close()


def _search(
    consumer: Consumer, key: bytes, tag: bytes, since: int, high: int, timeout_s: float
) -> Forwarded | None:
    deadline = time.monotonic() + timeout_s
    tail, last_data, closed, written = since, None, False, False
    while (remaining := deadline - time.monotonic()) > 0:
        message = consumer.poll(min(remaining, 0.5))
        if message is None:
            continue
        error = message.error()
        if error is not None:
            if error.code() != KafkaError._PARTITION_EOF:
                raise KafkaException(error)
            if (message.offset() or 0) >= high:  # stable up to where it ended at the start
                return Forwarded(written, last_data, closed, tail)
            continue
        if message.key() != key:
            continue
        offset = message.offset() or 0
        headers = message.headers()
        mine = header_value(headers, FORWARD_HEADER) == tag
        if is_control(headers):
            if mine:
                written, closed = (
                    True,
                    closed
                    or header_value(headers, CONTROL_HEADER) == ControlEvent.CLOSE.value.encode(),
                )
            continue
        if not written or mine:  # data after ours belongs to later appends
            tail = offset + 1
        if mine:
            written, last_data = True, offset
    return None
