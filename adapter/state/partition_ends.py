"""How far data partitions are written as of now: each partition's high watermark, asked of
the broker after the question was put, one query shared by every concurrent asker.

The high watermark, not the last stable offset: Kafka answers a transaction's commit before
it writes the commit's markers, so right after an append is acknowledged its records may still
lie above the partition's last stable offset. Every record below the high watermark is
committed or aborted once the transactions open at that moment end; a `read_committed` scan
up to it (`PartitionScanner`, `stop`) waits for their markers, and so holds every append
acknowledged before the question.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from adapter.log.errors import LogUnavailable
from adapter.state.single_flight import Fresh
from topology.kafka_client import KafkaAccess

Place = tuple[str, int]  # (topic, partition)
MAX_PLACES = 4096  # partitions whose shared query is kept; past this the table starts again


class PartitionEnds:
    def __init__(self, kafka: KafkaAccess, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        owned: dict[str, Any] = {
            "group.id": kafka.group("ends"),  # required by librdkafka; never joined
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",  # its end is the high watermark
        }
        self._config = kafka.config(owned, "librdkafka.ends")
        self._kafka = kafka
        self._consumer: Consumer | None = None
        self._thread = concurrent.futures.ThreadPoolExecutor(1, "partition-ends")
        self._asked: dict[Place, Fresh[int]] = {}

    async def written(self, topic: str, partition: int) -> int:
        """The partition's high watermark, asked after this call began (LogUnavailable when
        the broker does not answer in time). Concurrent callers share one query."""
        place = (topic, partition)
        fresh = self._asked.get(place)
        if fresh is None:
            if len(self._asked) >= MAX_PLACES:
                self._asked.clear()  # a query under way still answers its own callers
            fresh = self._asked[place] = Fresh(lambda: self._query(place))
        return await fresh.get()

    async def close(self) -> None:
        if self._consumer is not None:
            await asyncio.get_running_loop().run_in_executor(self._thread, self._consumer.close)
        self._thread.shutdown(wait=False, cancel_futures=True)

    async def _query(self, place: Place) -> int:
        call = asyncio.get_running_loop().run_in_executor(self._thread, self._high, place)
        try:
            return await asyncio.wait_for(asyncio.shield(call), self.timeout_s * 2)
        except TimeoutError as error:
            raise LogUnavailable(f"the end of {place[0]}[{place[1]}] was not answered") from error

    def _high(self, place: Place) -> int:
        """On the thread. A handle whose query failed is made again at the next: its metadata
        may stay stale while a killed broker comes back (as `PartitionScanner`'s)."""
        if self._consumer is not None and self._kafka.clients.stale(self._consumer):
            self._consumer.close()
            self._consumer = None
        if self._consumer is None:
            self._consumer = self._kafka.consumer(self._config)
        consumer = self._consumer
        try:
            _, high = consumer.get_watermark_offsets(
                TopicPartition(*place), self.timeout_s, cached=False
            )
        except KafkaException as error:
            self._consumer = None
            consumer.close()
            raise LogUnavailable(f"the end of {place[0]}[{place[1]}]: {error}") from error
        return int(high)
