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
import uuid
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Probe:
    """One record of the transaction, where Kafka acknowledged it."""

    topic: str
    partition: int
    offset: int


def committed(bootstrap_servers: str, probe: Probe, timeout_s: float) -> bool | None:
    """True if the probe's record is committed, False if aborted, None if not known yet
    (the transaction is still open, or the broker did not answer in time)."""
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap_servers,
        "group.id": f"durable-kafka-outcome-{uuid.uuid4().hex}",  # never joined
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "enable.partition.eof": True,
        "logger": logging.getLogger("librdkafka.outcome"),
    }
    consumer = Consumer(config)
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
