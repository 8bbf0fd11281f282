"""The one consumer of a mounted topic per instance: it builds the topic's key index.

It reads every partition from its earliest offset (`read_committed`, so aborted records are
never indexed), then follows the topic; partitions added to the topic later are picked up
from their start. Records are handed to the event loop in batches, which applies them to the
`KeyIndex` and wakes the live readers of the keys they touched. The mount is `caught_up` once
every partition has reported its end: reads of it answer 503 until then, because an index
still being built would call a key's tail what is only the part indexed so far.

With a `KeyIndexStore`, the index is loaded from its file at start and each partition read
from its checkpoint instead of its start; every `SAVE_S`, once caught up and at close, the
keys changed since are saved with the offsets reached (`key_index_store.py`).

When the client's certificate files change (`LiveClients.renew`), the consumer is made again
between two polls, the brokers may soon refuse the old certificate, and resumes each partition
at the offset after what is indexed: nothing is indexed twice or missed. So it is when the
partition check has had no metadata answer for `STALLED_S` (`topology/client_stalls.py`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from adapter.log.key_index import KeyIndex
from adapter.log.key_index_store import KeyIndexStore, begin, rows
from adapter.log.reader import poll_batch
from topology.client_stalls import STALLED_S, Stall
from topology.kafka_client import KafkaAccess, denied
from topology.mount_positions import position

log = logging.getLogger(__name__)

POLL_S = 0.2
PARTITIONS_CHECK_S = 10.0  # how often a partition-count increase is looked for
SAVE_S = 5.0  # how often the index is saved, when it has a store
SAVE_PIECE = 5_000  # keys copied for a save between two turns of the event loop


@dataclass(frozen=True)
class Naming:
    """How a mounted topic's records are named: which topic, the stream id of a key (None:
    not addressable), and the media type of a content-type header's value (None: not one)."""

    topic: str
    stream_id_of: Callable[[bytes], str | None]
    content_type_header: str | None
    media_type: Callable[[bytes], str | None]


class MountIndexer:
    def __init__(
        self,
        kafka: KafkaAccess,
        naming: Naming,
        index: KeyIndex,
        timeout_s: float,
        on_keys: Callable[[set[str]], None],
        store: KeyIndexStore | None = None,
    ) -> None:
        self.naming = naming
        self.index = index
        self.timeout_s = timeout_s
        self.on_keys = on_keys  # the stream ids that got records, on the event loop
        self.store = store
        self.partitions = 0
        self.scanned = 0  # records read from the topic by this indexer
        self.resumed = False  # started from the store's checkpoints
        self._at_end: set[int] = set()
        self._next: dict[int, int] = {}  # per partition, the offset after what is indexed
        self._starts: dict[int, int] = {}  # per partition, where reading starts
        self._saved_at = 0.0
        self.ready = asyncio.Event()  # set once caught up: the mount serves reads from then on
        owned: dict[str, Any] = {
            "group.id": kafka.group("mount", unique=True),  # never joined or committed
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
        }
        self._config = kafka.config(owned, "librdkafka.mount")
        self._kafka = kafka
        self._consumer: Consumer | None = None
        self._checked_at = 0.0
        self._stall = Stall(STALLED_S)  # how long the partition check has had no answer
        self._thread = concurrent.futures.ThreadPoolExecutor(1, f"mount-{naming.topic}")

    @property
    def caught_up(self) -> bool:
        return self.partitions > 0 and len(self._at_end) >= self.partitions

    def progress(self) -> dict[str, int | bool]:
        return {
            "partitions": self.partitions,
            "partitions_caught_up": len(self._at_end),
            "scanned": self.scanned,
            "resumed": self.resumed,
        }

    async def run(self) -> None:
        """Index the topic and follow it; runs until cancelled."""
        await self._resume()
        while True:
            messages = await self._on_thread(self._poll)
            touched: set[str] = set()
            for message in messages:
                stream_id = self._apply(message)
                if stream_id is not None:
                    touched.add(stream_id)
            if touched:
                self.on_keys(touched)
            if self.caught_up:
                self.ready.set()
            if self.caught_up and time.monotonic() - self._saved_at >= SAVE_S:
                await self._save()

    async def close(self) -> None:
        if self._consumer is not None:
            await self._on_thread(self._consumer.close)
        if self.store is not None:
            store = self.store
            await self._save()
            await self._on_thread(store.close)
        self._thread.shutdown(wait=False, cancel_futures=True)

    async def _resume(self) -> None:
        """Load the store's index, if it has a usable one, and start from its checkpoints."""
        if self.store is None:
            return
        loaded = KeyIndex(self.index.max_positions, track_changes=True)
        checkpoints = await self._on_thread(lambda: self._load(loaded))
        if checkpoints:
            self.index.adopt(loaded)
            self._starts = dict(checkpoints)
            self._next = dict(checkpoints)
            self.resumed = True
            log.info("index of %s resumed: %d keys", self.naming.topic, len(self.index))

    def _load(self, loaded: KeyIndex) -> dict[int, int] | None:
        assert self.store is not None
        checkpoints = self.store.load(loaded)
        if checkpoints and not self._within_topic(checkpoints):
            checkpoints = None
        if not checkpoints:
            self.store.discard()  # read from the start: nothing old may stay in the file
        return checkpoints

    def _within_topic(self, checkpoints: dict[int, int]) -> bool:
        """Whether no checkpoint is past its partition's end (else the topic was re-created)."""
        consumer = self._consumer = self._consumer or self._kafka.consumer(self._config)
        for partition, offset in checkpoints.items():
            tp = TopicPartition(self.naming.topic, partition)
            try:
                _low, high = consumer.get_watermark_offsets(tp, timeout=self.timeout_s)
            except KafkaException as error:
                log.warning("index of %s not resumed: %s", self.naming.topic, error)
                return False
            if offset > high:
                log.warning("index of %s is ahead of the topic: read afresh", self.naming.topic)
                return False
        return True

    async def _save(self) -> None:
        """Save the keys changed since the last save, with the offsets they reflect."""
        self._saved_at = time.monotonic()
        store = self.store
        if store is not None and store.persisting:
            saved, changed = begin(self.index, self._next)
            for start in range(0, len(changed), SAVE_PIECE):
                saved.rows += rows(self.index, changed[start : start + SAVE_PIECE])
                await asyncio.sleep(0)  # a million new keys must not stall the loop
            await self._on_thread(lambda: store.save(saved))

    async def _on_thread(self, fn: Callable[[], Any]) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._thread, fn)

    def _poll(self) -> list[Message]:
        try:
            if self._consumer is not None and self._kafka.clients.stale(self._consumer):
                self._renew(self._consumer)
                log.info("indexer of %s renewed with the new certificate files", self.naming.topic)
            if self._consumer is None:
                self._consumer = self._kafka.consumer(self._config)
            if time.monotonic() - self._checked_at >= PARTITIONS_CHECK_S:
                self._check_partitions(self._consumer)
            return poll_batch(self._consumer, POLL_S)
        except KafkaException as error:
            log.warning("indexing mounted topic %s: %s", self.naming.topic, error)
            time.sleep(POLL_S)
            return []

    def _check_partitions(self, consumer: Consumer) -> None:
        """Assign partitions added to the topic; a consumer whose check has had no answer for
        `STALLED_S` is made again (and the error raised all the same)."""
        try:
            self._assign_new_partitions(consumer)
        except KafkaException:
            if self._stall.too_long(True, time.monotonic()):
                self._renew(consumer)
                log.warning(
                    "indexer of %s made again after %.0fs without reaching Kafka",
                    self.naming.topic,
                    self._stall.limit_s,
                )
            raise
        self._stall.too_long(False, time.monotonic())

    def _renew(self, old: Consumer) -> None:
        """A consumer made again (from the bootstrap servers and the certificate files), at the
        offsets the old one reached."""
        self._consumer = consumer = self._kafka.consumer(self._config)
        resume = {**self._starts, **self._next}
        consumer.assign(
            [
                TopicPartition(self.naming.topic, p, resume.get(p, OFFSET_BEGINNING))
                for p in range(self.partitions)
            ]
        )
        old.close()

    def _assign_new_partitions(self, consumer: Consumer) -> None:
        metadata = consumer.list_topics(self.naming.topic, timeout=self.timeout_s)
        topic = metadata.topics.get(self.naming.topic)
        self._checked_at = time.monotonic()
        if topic is None or topic.error is not None:
            asked = {"Topic": ("Read", self.naming.topic)}  # Read implies the Describe asked
            refusal = topic and topic.error and denied(topic.error, asked)
            why = refusal or (topic and topic.error)
            log.warning("mounted topic %s is not readable: %s", self.naming.topic, why)
            return
        count = len(topic.partitions)
        if count > self.partitions:
            added = range(self.partitions, count)
            consumer.incremental_assign(
                [
                    TopicPartition(self.naming.topic, p, self._starts.get(p, OFFSET_BEGINNING))
                    for p in added
                ]
            )
            log.info("indexing %s partitions %d..%d", self.naming.topic, self.partitions, count - 1)
            self.partitions = count

    def _apply(self, message: Message) -> str | None:
        """Index one record; the stream id it added to, if any."""
        error = message.error()
        partition = message.partition() or 0
        offset = message.offset() or 0
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                self._at_end.add(partition)
                self._next[partition] = max(self._next.get(partition, 0), offset)
            else:
                asked = {"Topic": ("Read", self.naming.topic)}
                log.warning(
                    "indexing mounted topic %s: %s",
                    self.naming.topic,
                    denied(error, asked) or error,
                )
            return None
        self.scanned += 1
        self._next[partition] = offset + 1
        key, value, counts = message.key(), message.value(), self.index.counts
        if key is None:
            counts.null_keys += 1
            return None
        if value is None:
            counts.tombstones += 1
            return None
        stream_id = self.naming.stream_id_of(key)
        if stream_id is None:
            counts.unaddressable += 1
            return None
        at = position(partition, offset)
        self.index.add(stream_id, at, self._content_type(message))
        return stream_id

    def _content_type(self, message: Message) -> str | None:
        name = self.naming.content_type_header
        if name is None:
            return None
        headers = message.headers() or []
        pairs = list(headers.items()) if isinstance(headers, dict) else headers
        for header, raw in pairs:
            if header == name and raw:
                return self.naming.media_type(raw if isinstance(raw, bytes) else raw.encode())
        return None
