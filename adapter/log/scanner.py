"""Whole-partition scans for the tier worker (and for rebuilding streams' states): every
committed record of a range, whatever its key.

One assign-only `read_committed` consumer on one thread. A scan below the partition's log start
fails (`auto.offset.reset=error`: BelowLogStart) rather than skipping ahead: a scan never hides
a hole.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from adapter.log.errors import BelowLogStart, LogUnavailable
from adapter.log.reader import bounded_prefetch, poll_batch
from topology.kafka_client import KafkaAccess
from topology.wire import (
    CONTENT_TYPE_HEADER,
    PRODUCER_EPOCH_HEADER,
    PRODUCER_ID_HEADER,
    PRODUCER_SEQ_HEADER,
    ProducerStamp,
    ReadHeaders,
    header_value,
    is_control,
)

T = TypeVar("T")
POLL_S = 0.05  # between two looks for a commit's answer


@dataclass(frozen=True)
class Scanned:
    """One committed record of a partition."""

    offset: int
    key: bytes
    value: bytes
    content_type: str
    timestamp_ms: int
    control: bool
    producer: ProducerStamp | None = None  # from the producer-* headers, when present


# (offset, value bytes, timestamp) of a record: all the tier meter needs of it.
Measured = tuple[int, int, int]
# (key, offset, timestamp, headers) of a record: what a stream's state is rebuilt from.
Headed = tuple[bytes, int, int, ReadHeaders]
R = TypeVar("R", Scanned, Measured, Headed)


@dataclass(frozen=True)
class Scan(Generic[R]):
    records: list[R]
    next_offset: int  # every committed record below it was returned (or an earlier scan's)
    at_end: bool  # next_offset is the partition's end (its last stable offset) or `stop`
    size: int = 0  # bytes of the records' values read


class PartitionScanner:
    def __init__(self, kafka: KafkaAccess, timeout_s: float, role: str = "tier") -> None:
        self.timeout_s = timeout_s
        owned: dict[str, Any] = {
            "group.id": kafka.group(role),  # required by librdkafka; never joined
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "auto.offset.reset": "error",
            "fetch.wait.max.ms": 10,
            "on_commit": self._answered,
            **bounded_prefetch(),
        }
        self._config = kafka.config(owned, f"librdkafka.{role}")
        # The answer to the commit in flight (on the scanner's thread): error, partitions.
        self._answer: tuple[KafkaError | None, list[TopicPartition]] | None = None
        self._kafka = kafka
        self._consumer: Consumer | None = None
        self._thread = concurrent.futures.ThreadPoolExecutor(1, f"{role}-scanner")

    async def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        """(log start offset, high watermark) of the partition, asked of the broker."""
        return await self._run(lambda c: _watermarks(c, topic, partition, self.timeout_s))

    async def scan(
        self, topic: str, partition: int, start: int, stop: int | None, max_bytes: int
    ) -> Scan[Scanned]:
        """Committed records from `start`, up to `stop` (None: the partition's end), until
        about `max_bytes` of values were read (at least one record)."""
        return await self._run(
            lambda c: self._scan(c, topic, partition, start, stop, max_bytes, _scanned)
        )

    async def measure(
        self, topic: str, partition: int, start: int, max_bytes: int
    ) -> Scan[Measured]:
        """As `scan` to the partition's end, but only each record's (offset, value bytes,
        timestamp): the tier meter reads every record once, and decoding headers it never
        looks at cost as much as the appends' own requests (`docs/performance.md`)."""
        return await self._run(
            lambda c: self._scan(c, topic, partition, start, None, max_bytes, _measured)
        )

    async def scan_headed(
        self, topic: str, partition: int, start: int, max_bytes: int, stop: int | None = None
    ) -> Scan[Headed]:
        """As `scan`, but only each record's key, offset, timestamp and headers: a stream's
        state is carried forward from them (`adapter/state/stream_recovery.py`,
        `adapter/cluster/data_tails.py`)."""
        return await self._run(
            lambda c: self._scan(c, topic, partition, start, stop, max_bytes, _headed)
        )

    async def commit(self, offsets: list[TopicPartition]) -> None:
        """Commit `offsets` (each with its metadata) to the scanner's group, as a consumer
        that never joins it does (LogUnavailable: refused, or not answered within the
        timeout). Asynchronous, its answer polled for: a synchronous commit whose group
        coordinator does not answer holds the thread, and each call after it, for most of a
        minute."""
        await self._run(lambda c: self._commit(c, offsets))

    async def committed(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """The offsets (with their metadata) the scanner's group holds for `partitions`; a
        partition without one has a negative offset."""
        return await self._run(lambda c: _committed(c, partitions, self.timeout_s))

    async def close(self) -> None:
        if self._consumer is not None:
            await asyncio.get_running_loop().run_in_executor(self._thread, self._consumer.close)
        self._thread.shutdown(wait=False, cancel_futures=True)

    async def _run(self, fn: Callable[[Consumer], T]) -> T:
        loop = asyncio.get_running_loop()
        call = loop.run_in_executor(self._thread, self._with_consumer, fn)
        try:
            return await asyncio.wait_for(asyncio.shield(call), self.timeout_s * 3)
        except TimeoutError as error:
            raise LogUnavailable("scanning a partition timed out") from error

    def _with_consumer(self, fn: Callable[[Consumer], T]) -> T:
        """`fn` with the consumer, on the scanner's thread. One whose call failed is closed and
        made again at the next: a call failing while a killed broker comes back can leave a
        handle's metadata stale, the partition "unknown" without asking, for minutes
        (a broker kill in the fault suite showed it)."""
        if self._consumer is not None and self._kafka.clients.stale(self._consumer):
            self._consumer.close()  # made before the certificate files changed
            self._consumer = None
        if self._consumer is None:
            self._consumer = self._kafka.consumer(self._config)
        consumer = self._consumer
        try:
            return fn(consumer)
        except LogUnavailable:
            self._consumer = None
            consumer.close()
            raise

    def _commit(self, consumer: Consumer, offsets: list[TopicPartition]) -> None:
        self._answer = None
        try:
            consumer.commit(offsets=offsets, asynchronous=True)
            deadline = time.monotonic() + self.timeout_s
            while self._answer is None and time.monotonic() < deadline:
                consumer.poll(POLL_S)  # serves the commit's callback
        except KafkaException as error:
            raise LogUnavailable(f"committing offsets: {error}") from error
        if self._answer is None:
            raise LogUnavailable(f"committing offsets: no answer within {self.timeout_s:g} s")
        error, answered = self._answer
        refused = error or next((part.error for part in answered if part.error), None)
        if refused is not None:
            raise LogUnavailable(f"committing offsets: {refused}")

    def _answered(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        self._answer = (error, partitions)

    def _scan(
        self,
        consumer: Consumer,
        topic: str,
        partition: int,
        start: int,
        stop: int | None,
        max_bytes: int,
        kept: Callable[[Message], R],
    ) -> Scan[R]:
        consumer.assign([TopicPartition(topic, partition, start)])
        try:
            return self._collect(consumer, start, stop, max_bytes, kept)
        except KafkaException as error:
            inner = error.args[0] if error.args else None
            if isinstance(inner, KafkaError) and inner.code() == KafkaError._AUTO_OFFSET_RESET:
                raise BelowLogStart(f"scanning {topic}[{partition}]: {error}") from error
            raise LogUnavailable(f"scanning {topic}[{partition}]: {error}") from error
        finally:
            consumer.unassign()

    def _collect(
        self,
        consumer: Consumer,
        start: int,
        stop: int | None,
        max_bytes: int,
        kept: Callable[[Message], R],
    ) -> Scan[R]:
        records: list[R] = []
        size, position = 0, start
        while True:
            batch = poll_batch(consumer, self.timeout_s)
            if not batch:
                raise LogUnavailable("no answer from the partition before the timeout")
            for message in batch:
                if (error := message.error()) is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(error)
                    position = max(position, message.offset() or 0)
                    if stop is None or position >= stop:
                        return Scan(records, position if stop is None else stop, True, size)
                    continue  # markers below `stop` still to come
                offset = message.offset() or 0
                if stop is not None and offset >= stop:
                    return Scan(records, stop, True, size)
                records.append(kept(message))
                size += len(message.value() or b"")
                position = offset + 1
                if size >= max_bytes:
                    return Scan(records, position, stop is not None and position >= stop, size)


def _scanned(message: Message) -> Scanned:
    headers = message.headers()
    content_type = header_value(headers, CONTENT_TYPE_HEADER) or b""
    return Scanned(
        offset=message.offset() or 0,
        key=message.key() or b"",
        value=message.value() or b"",
        content_type=content_type.decode(errors="replace"),
        timestamp_ms=message.timestamp()[1],
        control=is_control(headers),
        producer=_producer(headers),
    )


def _headed(message: Message) -> Headed:
    return (message.key() or b"", message.offset() or 0, message.timestamp()[1], message.headers())


def _measured(message: Message) -> Measured:
    return (message.offset() or 0, len(message.value() or b""), message.timestamp()[1])


def _producer(headers: ReadHeaders) -> ProducerStamp | None:
    """The producer stamp of an append made with Producer-* headers (None if any is off)."""
    found = [header_value(headers, name) for name in _PRODUCER_HEADERS]
    if any(value is None for value in found):
        return None
    producer_id, epoch, seq = (value.decode(errors="replace") for value in found if value)
    try:
        return ProducerStamp(producer_id, int(epoch), int(seq))
    except ValueError:
        return None


_PRODUCER_HEADERS = (PRODUCER_ID_HEADER, PRODUCER_EPOCH_HEADER, PRODUCER_SEQ_HEADER)


def _watermarks(
    consumer: Consumer, topic: str, partition: int, timeout_s: float
) -> tuple[int, int]:
    try:
        low, high = consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout_s, cached=False
        )
    except KafkaException as error:
        raise LogUnavailable(f"watermarks of {topic}[{partition}]: {error}") from error
    return int(low), int(high)


def _committed(
    consumer: Consumer, partitions: list[TopicPartition], timeout_s: float
) -> list[TopicPartition]:
    try:
        found: list[TopicPartition] = consumer.committed(partitions, timeout=timeout_s)
    except KafkaException as error:
        raise LogUnavailable(f"fetching committed offsets: {error}") from error
    return found
