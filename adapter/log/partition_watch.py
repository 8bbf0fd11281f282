"""One consumer following a changing set of data partitions: the key and offset of each record
committed in them, for live readers to be woken by (`adapter/live/data_wakeups.py`).

Assign-only and `read_committed`, on its own thread: records are seen once committed, in
offset order per partition. A partition newly followed starts where the caller says; one
followed already goes on from the last record seen, whatever else changes. Following nothing,
it fetches nothing.

While it follows something, it asks for a followed topic's metadata every `PROBE_S`; a consumer
with no answer for `STALLED_S` is made again (why: `topology/client_stalls.py`), and goes on
from the last record seen: a fetch of a client left without brokers just returns nothing, so
this is the only way to tell it from quiet partitions.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from adapter.log.errors import LogUnavailable
from adapter.log.reader import bounded_prefetch
from topology.client_stalls import STALLED_S, Stall
from topology.kafka_client import KafkaAccess

log = logging.getLogger(__name__)

Place = tuple[str, int]  # (topic, partition)
Seen = tuple[str, int, bytes, int]  # (topic, partition, key, offset) of a committed record
BATCH = 500  # records taken per poll
PROBE_S = 10.0  # how often the consumer is asked whether it still reaches Kafka


class PartitionWatch:
    def __init__(self, kafka: KafkaAccess, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        owned: dict[str, Any] = {
            "group.id": kafka.group("wakeups"),  # required by librdkafka; never joined
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": False,
            "auto.offset.reset": "latest",  # a start freed by retention: go on from the end
            "fetch.wait.max.ms": 50,
            **bounded_prefetch(),
        }
        self._config = kafka.config(owned, "librdkafka.wakeups")
        self._kafka = kafka
        self._consumer: Consumer | None = None
        self._thread = concurrent.futures.ThreadPoolExecutor(1, "data-wakeups")
        self._next: dict[Place, int] = {}  # where each followed partition goes on from
        self._stall = Stall(STALLED_S)
        self._probed_at = time.monotonic()

    @property
    def followed(self) -> set[Place]:
        return set(self._next)

    async def follow(self, starts: Mapping[Place, int]) -> None:
        """Follow exactly the partitions of `starts`: new ones from the offset given."""
        following = {place: self._next.get(place, start) for place, start in starts.items()}
        if following == self._next:
            return
        await self._run(lambda consumer: self._assign(consumer, following))
        self._next = following

    async def poll(self, wait_s: float) -> list[Seen]:
        """The records committed since the last poll (waiting up to `wait_s` for some)."""
        if not self._next:
            return []
        seen: list[Seen] = await self._run(lambda consumer: self._poll(consumer, wait_s))
        for topic, partition, _, offset in seen:
            place = (topic, partition)
            if place in self._next:
                self._next[place] = max(self._next[place], offset + 1)
        return seen

    async def close(self) -> None:
        if self._consumer is not None:
            await asyncio.get_running_loop().run_in_executor(self._thread, self._consumer.close)
        self._thread.shutdown(wait=False, cancel_futures=True)

    async def _run(self, fn: Any) -> Any:
        call = asyncio.get_running_loop().run_in_executor(self._thread, self._with_consumer, fn)
        try:
            return await asyncio.wait_for(asyncio.shield(call), self.timeout_s * 2)
        except TimeoutError as error:
            raise LogUnavailable("following data partitions timed out") from error

    def _with_consumer(self, fn: Any) -> Any:
        """`fn` with the consumer, on the thread; one whose call failed is made again (and
        assigned again) at the next call."""
        if self._consumer is not None and self._kafka.clients.stale(self._consumer):
            self._consumer.close()
            self._consumer = None
        if self._consumer is None:
            self._consumer = self._kafka.consumer(self._config)
            self._assign(self._consumer, self._next)
        consumer = self._consumer
        try:
            done = fn(consumer)
        except KafkaException as error:
            self._consumer = None
            consumer.close()
            raise LogUnavailable(f"following data partitions: {error}") from error
        self._probe(consumer)
        return done

    def _probe(self, consumer: Consumer) -> None:
        """Every `PROBE_S` while following: whether `consumer` still reaches Kafka; one that
        has not for `STALLED_S` is closed, and made again at the next call."""
        now = time.monotonic()
        if not self._next or now - self._probed_at < PROBE_S:
            return
        self._probed_at = now
        if self._stall.too_long(not self._reaches(consumer), now):
            log.warning(
                "the data partitions' watch has not reached Kafka for %.0fs: making its "
                "consumer again, from the bootstrap servers",
                self._stall.limit_s,
            )
            self._consumer = None
            consumer.close()

    def _reaches(self, consumer: Consumer) -> bool:
        topic = next(iter(self._next))[0]
        try:
            consumer.list_topics(topic, timeout=self.timeout_s)
        except KafkaException:
            return False
        return True

    @staticmethod
    def _assign(consumer: Consumer, following: Mapping[Place, int]) -> None:
        consumer.assign([TopicPartition(t, p, offset) for (t, p), offset in following.items()])

    @staticmethod
    def _poll(consumer: Consumer, wait_s: float) -> list[Seen]:
        seen: list[Seen] = []
        for message in consumer.consume(BATCH, wait_s):
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaException(error)
            topic, partition = message.topic() or "", message.partition() or 0
            seen.append((topic, partition, message.key() or b"", message.offset() or 0))
        return seen
