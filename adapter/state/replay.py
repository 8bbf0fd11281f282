"""Rebuilding the catalog from the compacted meta topic, up to the end captured at start."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from adapter.log.errors import LogUnavailable
from adapter.state.catalog import Catalog

log = logging.getLogger(__name__)


async def replay(bootstrap_servers: str, topic: str, catalog: Catalog, timeout_s: float) -> int:
    """Apply every committed record of `topic` (partition 0) to `catalog`; return how many."""
    return await asyncio.to_thread(_replay, bootstrap_servers, topic, catalog, timeout_s)


def _replay(bootstrap_servers: str, topic: str, catalog: Catalog, timeout_s: float) -> int:
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap_servers,
        "group.id": f"durable-kafka-replay-{uuid.uuid4().hex}",  # never joined or committed
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "enable.partition.eof": True,
        "logger": logging.getLogger("librdkafka.replay"),
    }
    consumer = Consumer(config)
    try:
        return _apply_all(consumer, topic, catalog, timeout_s)
    except KafkaException as error:
        raise LogUnavailable(f"replaying {topic}: {error}") from error
    finally:
        consumer.close()


def _apply_all(consumer: Consumer, topic: str, catalog: Catalog, timeout_s: float) -> int:
    partition = TopicPartition(topic, 0)
    low, high = consumer.get_watermark_offsets(partition, timeout=timeout_s)
    if high <= low:
        return 0
    consumer.assign([TopicPartition(topic, 0, low)])
    applied = 0
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        first = consumer.poll(0.5)
        batch = [first, *consumer.consume(1000, 0)] if first is not None else []
        if batch:
            deadline = time.monotonic() + timeout_s  # progress: the deadline is per stall
        for message in batch:
            error = message.error()
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                log.info("replayed %d records of %s", applied, topic)
                return applied
            if error is not None:
                raise KafkaException(error)
            catalog.apply((message.key() or b"").decode(), message.value())
            applied += 1
    raise LogUnavailable(f"replaying {topic} stalled for {timeout_s}s before its end")
