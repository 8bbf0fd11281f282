"""Catch-up reads from Kafka: a small pool of assign-only, read_committed consumers.

A stream shares its partition with other streams, so a read filters by key. Each read scans at
most `max_scan_bytes` of the partition (whoever's records they are) and returns at most
`max_read_bytes` of the stream's own data; when a bound stops it short of the stream's tail it
answers with the position reached, and the client's next request continues from there.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
from collections import deque
from collections.abc import Callable, MutableSequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from adapter.log.errors import BelowLogStart, LogUnavailable
from topology.kafka_client import KafkaAccess
from topology.wire import TRACE_HEADER, header_bytes, header_value, is_control

log = logging.getLogger(__name__)
T = TypeVar("T")

# A consumer reading a stream's partition prefetches at most this much ahead of the read, and
# looks at a full queue again after 10 ms (`bounded_prefetch`).
QUEUE_KBYTES = 16 * 1024
QUEUE_BACKOFF_MS = 10
# What a record costs a scan besides its key, value and headers: librdkafka's message and the
# Python object that carries it. Counting it bounds the records one scan reads, not only their
# bytes: one-byte values alone would let a scan of 16 MiB read 16 million records.
RECORD_COST = 256


@dataclass(frozen=True)
class ReadLimits:
    max_read_bytes: int
    max_scan_bytes: int
    timeout_s: float
    traces: bool = False  # collect the records' trace contexts (tracing on: `ReadResult.traces`)


@dataclass(frozen=True)
class Budget:
    """What a piece of a read may still take of the reader's own bounds (`max_bytes`,
    `max_messages`): None is no bound. A piece of an answer that holds nothing yet (`empty`)
    takes its first message whatever its size."""

    bytes: int | None = None
    messages: int | None = None
    empty: bool = True

    def full(self, size: int, count: int, next_size: int) -> bool:
        """Whether a piece that took `count` messages of `size` bytes stops before the next."""
        if self.empty and count == 0:
            return False
        if self.messages is not None and count >= self.messages:
            return True
        return self.bytes is not None and size + next_size > self.bytes


UNBOUNDED = Budget()


@dataclass(frozen=True)
class ReadRequest:
    topic: str
    partition: int
    key: bytes
    start: int  # first Kafka offset to consider
    stop: int  # the stream's tail: never read at or past it
    # Bytes of this range already in the response (read from cold chunks): they count
    # towards `max_read_bytes` as if this read had read them itself.
    already: int = 0
    budget: Budget = UNBOUNDED
    # At most this much of the partition, if less than `max_scan_bytes` (what is left of the
    # bound of a lookup made of several scans).
    scan_bytes: int | None = None


@dataclass(frozen=True)
class RecordPosition:
    """Where one of the stream's records is in its partition, and when it was written."""

    offset: int
    timestamp_ms: int
    size: int


@dataclass(frozen=True)
class TimeFound:
    """Kafka's answer to "which record was written first at or after this time"."""

    offset: int | None  # None: no record of the partition was written that late
    earliest: int  # the first offset the partition still holds (below it: freed)


@dataclass(frozen=True)
class ReadResult:
    messages: list[bytes]
    next_offset: int  # where the next read continues
    complete: bool  # True when next_offset reached the requested stop
    scanned: int = 0  # what the scan cost of its bound (`scan_cost` of each record read)
    # The `traceparent` headers of the messages read (tracing on), for live deliveries' links.
    traces: list[bytes] = field(default_factory=list)


class LogReader:
    """Consumers are expensive to create, so a few are kept and lent to one read at a time."""

    def __init__(
        self,
        kafka: KafkaAccess,
        limits: ReadLimits,
        pool_size: int = 4,
        fetch_bytes: int | None = None,
    ) -> None:
        self.limits = limits
        owned: dict[str, Any] = {
            "group.id": kafka.group("reader"),  # required by librdkafka; never joined or committed
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            # Below the log start (tiered and freed since the catalog was read): an error, so
            # the read fails (503) instead of skipping to the earliest offset left.
            "auto.offset.reset": "error",
            "fetch.wait.max.ms": 10,
            **bounded_prefetch(),
        }
        if fetch_bytes is not None:
            owned.update(sparse_fetch_config(fetch_bytes))
        self._config = kafka.config(owned, "librdkafka.reader")
        self._kafka = kafka
        self._idle: asyncio.Queue[Consumer] = asyncio.Queue()
        self._created = 0
        self._pool_size = pool_size
        self._threads = concurrent.futures.ThreadPoolExecutor(pool_size, "kafka-reader")

    async def read(self, request: ReadRequest) -> ReadResult:
        if request.start >= request.stop:
            return ReadResult([], request.start, True)
        return await self.lend(lambda consumer: self._scan(consumer, request))

    async def positions(
        self, request: ReadRequest, keep: int | None = None
    ) -> tuple[list[RecordPosition], ReadResult]:
        """Where the stream's records from `request.start` are (bounded like a read; the
        result holds no message): for a console's per-message Kafka coordinates and its seek
        to the last N messages, which keeps only the last `keep` of them."""
        found: deque[RecordPosition] = deque(maxlen=keep)
        if request.start >= request.stop:
            return [], ReadResult([], request.start, True)
        result = await self.lend(lambda consumer: self._scan(consumer, request, found))
        return list(found), result

    async def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        """The first offset of the partition written at or after `timestamp_ms`, if any."""

        def look_up(consumer: Consumer) -> int | None:
            asked = [TopicPartition(topic, partition, timestamp_ms)]
            try:
                [answer] = consumer.offsets_for_times(asked, timeout=self.limits.timeout_s)
            except KafkaException as error:
                raise LogUnavailable(f"looking up a time in {topic}: {error}") from error
            return answer.offset if answer.offset >= 0 else None

        return await self.lend(look_up)

    async def log_start(self, topic: str, partition: int) -> int:
        """The earliest offset Kafka still holds of the partition (below it: the cold tier)."""

        def look_up(consumer: Consumer) -> int:
            try:
                return _log_start(consumer, topic, partition, self.limits.timeout_s)
            except KafkaException as error:
                raise LogUnavailable(f"asking where {topic} starts: {error}") from error

        return await self.lend(look_up)

    async def held_since(self, topic: str, partition: int, timestamp_ms: int) -> TimeFound:
        """The partition's first offset written at or after `timestamp_ms` (None if none is),
        with the earliest offset Kafka still holds, asked in one turn of a pooled consumer."""

        def look_up(consumer: Consumer) -> TimeFound:
            asked = TopicPartition(topic, partition, timestamp_ms)
            timeout = self.limits.timeout_s
            try:
                [answer] = consumer.offsets_for_times([asked], timeout=timeout)
                low = _log_start(consumer, topic, partition, timeout)
            except KafkaException as error:
                raise LogUnavailable(f"looking up a time in {topic}: {error}") from error
            return TimeFound(answer.offset if answer.offset >= 0 else None, low)

        return await self.lend(look_up)

    async def lend(self, work: Callable[[Consumer], T]) -> T:
        """Run `work` with a pooled consumer on a reader thread (it must unassign when done)."""
        consumer = await self._borrow()
        loop = asyncio.get_running_loop()
        scan = loop.run_in_executor(self._threads, work, consumer)
        try:
            result = await asyncio.wait_for(asyncio.shield(scan), self.limits.timeout_s * 2)
        except TimeoutError as error:
            # Its thread may still be using the consumer: it goes back to the pool only when
            # that scan is over, so two reads never share one consumer.
            scan.add_done_callback(lambda _done: self._idle.put_nowait(consumer))
            raise LogUnavailable("reading from kafka timed out") from error
        except LogUnavailable as error:
            if isinstance(error, BelowLogStart):  # an answer, not a failure of the consumer
                self._idle.put_nowait(consumer)
            else:
                self._idle.put_nowait(self._replace(consumer))
            raise
        except BaseException:
            self._idle.put_nowait(consumer)
            raise
        self._idle.put_nowait(consumer)
        return result

    def _replace(self, failed: Consumer) -> Consumer:
        """A fresh consumer for one whose Kafka call failed (its thread's work is over), or
        one made before the certificate files changed, which is closed: a call failing while
        a killed broker comes back can leave a handle's metadata stale, the partition
        "unknown" without asking, for minutes (a broker kill in the fault suite showed it)."""
        with contextlib.suppress(RuntimeError):  # closing down: its threads are gone
            self._threads.submit(failed.close)
        return self._kafka.consumer(self._config)

    async def close(self) -> None:
        while not self._idle.empty():
            consumer = self._idle.get_nowait()
            await asyncio.get_running_loop().run_in_executor(self._threads, consumer.close)
        self._threads.shutdown(wait=False, cancel_futures=True)

    async def _borrow(self) -> Consumer:
        if self._idle.empty() and self._created < self._pool_size:
            self._created += 1
            return self._kafka.consumer(self._config)
        consumer = await self._idle.get()
        if self._kafka.clients.stale(consumer):  # made before the certificate files changed
            return self._replace(consumer)
        return consumer

    def _scan(
        self,
        consumer: Consumer,
        request: ReadRequest,
        positions: MutableSequence[RecordPosition] | None = None,
    ) -> ReadResult:
        consumer.assign([TopicPartition(request.topic, request.partition, request.start)])
        try:
            return self._collect(consumer, request, positions)
        except KafkaException as error:
            inner = error.args[0] if error.args else None
            if isinstance(inner, KafkaError) and inner.code() == KafkaError._AUTO_OFFSET_RESET:
                raise BelowLogStart(f"reading {request.topic}: {error}") from error
            raise LogUnavailable(f"reading {request.topic}: {error}") from error
        finally:
            consumer.unassign()

    def _collect(
        self,
        consumer: Consumer,
        request: ReadRequest,
        positions: MutableSequence[RecordPosition] | None,
    ) -> ReadResult:
        """The stream's messages in the request's range, as far as the bounds let it go; or,
        given `positions`, where they are instead (their bytes are not kept)."""
        messages: list[bytes] = []
        traces: list[bytes] = []
        taken_count = read_bytes = scanned = 0
        most = self.limits.max_scan_bytes
        if request.scan_bytes is not None:
            most = min(most, request.scan_bytes)
        position = request.start
        while position < request.stop:
            for message in _next_batch(consumer, self.limits.timeout_s, request.topic):
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(error)
                    if (message.offset() or 0) >= request.stop:
                        return ReadResult(messages, request.stop, True, scanned, traces)
                    # Everything below `stop` is committed, but a transaction's markers reach
                    # the partition a moment after the commit returns: poll again until they do.
                    continue
                offset = message.offset() or 0
                if offset >= request.stop:
                    return ReadResult(messages, request.stop, True, scanned, traces)
                value = message.value() or b""
                scanned += scan_cost(message)
                headers = message.headers()
                if message.key() == request.key and not is_control(headers):
                    taken = request.already + read_bytes + len(value)
                    if (taken_count or request.already) and taken > self.limits.max_read_bytes:
                        return ReadResult(messages, offset, False, scanned, traces)
                    if request.budget.full(read_bytes, taken_count, len(value)):
                        return ReadResult(messages, offset, False, scanned, traces)
                    taken_count += 1
                    read_bytes += len(value)
                    if positions is None:
                        messages.append(value)
                        if self.limits.traces:
                            _add_trace(traces, header_value(headers, TRACE_HEADER))
                    else:
                        positions.append(RecordPosition(offset, message.timestamp()[1], len(value)))
                position = offset + 1
                if scanned >= most and position < request.stop:
                    return ReadResult(messages, position, False, scanned, traces)
        return ReadResult(messages, request.stop, True, scanned, traces)


def _log_start(consumer: Consumer, topic: str, partition: int, timeout_s: float) -> int:
    """The earliest offset Kafka still holds of the partition, asked of the broker now."""
    low, _high = consumer.get_watermark_offsets(
        TopicPartition(topic, partition), timeout=timeout_s, cached=False
    )
    return int(low)


def _add_trace(traces: list[bytes], trace: bytes | None) -> None:
    """Add a record's trace context, once for the run of records of one append."""
    if trace is not None and (not traces or traces[-1] != trace):
        traces.append(trace)


def scan_cost(message: Message) -> int:
    """What reading one record costs a scan's bound: its key, value and headers, and
    `RECORD_COST` for the record itself."""
    key, value = message.key() or b"", message.value() or b""
    return RECORD_COST + len(key) + len(value) + header_bytes(message.headers())


def bounded_prefetch(kbytes: int = QUEUE_KBYTES) -> dict[str, Any]:
    """librdkafka prefetches up to 64 MiB a consumer by default: native memory that glibc keeps
    once freed. A 1 GiB bootstrap grew RSS by 134 MiB in a loaded CI run (36 MiB on a quiet
    machine), likeliest by overlapping the tier pass's measuring scan of the same partition,
    each consumer with its own 64 MiB. A full queue is looked at
    again after 10 ms, not librdkafka's 1 s, which made a smaller queue slow a catch-up ~4x."""
    return {"queued.max.messages.kbytes": kbytes, "fetch.queue.backoff.ms": QUEUE_BACKOFF_MS}


def sparse_fetch_config(fetch_bytes: int) -> dict[str, Any]:
    """Consumer settings for reads that seek from record to record (a mounted key's listed
    records): each fetch asks for `fetch_bytes` of the partition. By default a fetch asks for
    1 MiB, all of it decompressed and queued, and the consumer prefetches more behind it, so
    every seek paid for a MiB or more of other keys' records; a broker still returns the whole
    first batch at the offset when it is larger (KIP-74), so reads always progress."""
    return {
        "max.partition.fetch.bytes": fetch_bytes,
        "fetch.max.bytes": fetch_bytes,
        "message.max.bytes": fetch_bytes,  # librdkafka: fetch.max.bytes >= message.max.bytes
        # No prefetch past the fetch being read (a seek would discard it): the next fetch waits
        # until the queue is drained, checked every 1 ms (the default backoff is 1 s).
        "queued.min.messages": 1,
        "fetch.queue.backoff.ms": 1,
    }


def poll_batch(consumer: Consumer, timeout_s: float) -> list[Message]:
    """Wait for one message, then take whatever else is already fetched, without waiting.

    (`consume(n, timeout)` alone would wait the whole timeout unless n messages arrive.)
    """
    first = consumer.poll(timeout_s)
    return [first, *consumer.consume(1000, 0)] if first is not None else []


def _next_batch(consumer: Consumer, timeout_s: float, topic: str) -> list[Message]:
    batch = poll_batch(consumer, timeout_s)
    if not batch:
        raise LogUnavailable(f"no data from {topic} before the timeout")
    return batch
