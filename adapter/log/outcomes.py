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
from collections.abc import Mapping
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
    (the transaction is still open, or the broker did not answer in time) or never to be
    known from Kafka (freed meanwhile by tiering, a trim or age retention: a consumer there
    would skip to what is held and take the record for aborted)."""
    consumer = _consumer(kafka)
    try:
        part = TopicPartition(probe.topic, probe.partition)
        low, _high = consumer.get_watermark_offsets(part, timeout_s, cached=False)
        if probe.offset < low:
            log.warning("the outcome at %s cannot be learned: Kafka freed it", probe)
            return None
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
    found = forwarded_all(
        kafka, where.topic, where.partition, key, {forward_id: where.offset}, timeout_s
    )
    return None if found is None else found[forward_id]


def forwarded_all(
    kafka: KafkaAccess,
    topic: str,
    partition: int,
    key: bytes,
    since: Mapping[str, int],
    timeout_s: float,
) -> dict[str, Forwarded | None] | None:
    """`forwarded` for several appends of one stream at once (`since`: each one's forward id
    and the tail before it), in one read of the partition: an owner that went silent with many
    appends in flight is learned with one consumer, not one each.

    Kafka may have freed the partition below some offset meanwhile (tiering, a trim, age
    retention: the owner's successor goes on with them while the forwarder waits for it). An
    append found above that offset is written; one not found whose tail before it is below
    it may have been freed with the rest, and the chunks keep no forward id: its outcome is
    unknown (None), never "not written", which would have it written again."""
    consumer = _consumer(kafka, {"auto.offset.reset": "earliest"})
    start = min(since.values())
    try:
        part = TopicPartition(topic, partition)
        low, high = consumer.get_watermark_offsets(part, timeout_s, cached=False)
        consumer.assign([TopicPartition(topic, partition, max(start, low))])
        found = _search(consumer, key, since, high, timeout_s)
    except KafkaException as error:
        log.warning(
            "looking for %d forwarded appends in %s/%d: %s", len(since), topic, partition, error
        )
        return None
    finally:
        consumer.close()
    if found is None:
        return None
    return {
        tag: answer if answer.written or since[tag] >= low else None
        for tag, answer in found.items()
    }


@dataclass(slots=True)
class _Seen:
    """What one forwarded append's search has seen so far."""

    since: int
    tail: int
    last_data: int | None = None
    closed: bool = False
    written: bool = False

    def saw(self, offset: int, mine: bool, control: bytes | None) -> None:
        if offset < self.since:
            return
        if control is not None:
            if mine:
                self.written = True
                self.closed = self.closed or control == ControlEvent.CLOSE.value.encode()
            return
        if not self.written or mine:  # data after ours belongs to later appends
            self.tail = offset + 1
        if mine:
            self.written, self.last_data = True, offset

    def answer(self) -> Forwarded:
        return Forwarded(self.written, self.last_data, self.closed, self.tail)


def _search(
    consumer: Consumer, key: bytes, since: Mapping[str, int], high: int, timeout_s: float
) -> dict[str, Forwarded] | None:
    deadline = time.monotonic() + timeout_s
    seen = {tag.encode(): _Seen(offset, offset) for tag, offset in since.items()}
    while (remaining := deadline - time.monotonic()) > 0:
        message = consumer.poll(min(remaining, 0.5))
        if message is None:
            continue
        error = message.error()
        if error is not None:
            if error.code() != KafkaError._PARTITION_EOF:
                raise KafkaException(error)
            if (message.offset() or 0) >= high:  # stable up to where it ended at the start
                return {tag.decode(): state.answer() for tag, state in seen.items()}
            continue
        if message.key() != key:
            continue
        offset = message.offset() or 0
        headers = message.headers()
        tag = header_value(headers, FORWARD_HEADER)
        control = (header_value(headers, CONTROL_HEADER) or b"") if is_control(headers) else None
        for own, state in seen.items():
            state.saw(offset, own == tag, control)
    return None
