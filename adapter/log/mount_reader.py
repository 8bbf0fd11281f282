"""Catch-up reads of one key of a mounted topic, in one partition, through the reader's pool.

Two ways, chosen by the caller from the key's index (`key_index.py`): fetch the listed
offsets (jumping over other keys' records by seeking the consumer when the next one is
more than `JUMP` records ahead), or scan a range filtering by key, where the index dropped its
list. Either way a record is served only if its key is the key and its value is not null
(a tombstone), and the consumer is `read_committed`, so aborted records are never served.
Each read returns at most `max_read_bytes` and scans at most `max_scan_bytes`. Listed records
are fetched through consumers that fetch `SPARSE_FETCH_BYTES` at a time (the caller's choice of
reader), so a seek costs about one batch of the topic, not a MiB of it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from adapter.log.errors import LogUnavailable
from adapter.log.reader import (
    UNBOUNDED,
    Budget,
    LogReader,
    ReadLimits,
    ReadResult,
    poll_batch,
    scan_cost,
)

JUMP = 256  # a gap of more records than this is skipped by seeking the consumer
# What a fetch of listed records asks for (`reader.sparse_fetch_config`): a seek costs one
# fetch of this much (or of the one batch holding the record, if larger), not a MiB.
SPARSE_FETCH_BYTES = 64 * 1024


@dataclass(frozen=True)
class KeyRead:
    topic: str
    partition: int
    key: bytes
    start: int  # Kafka offset
    stop: int | None  # exclusive; None: to the partition's end
    wanted: tuple[int, ...] | None  # the offsets to fetch, sorted; None: scan by key
    budget: Budget = UNBOUNDED  # what the reader's own bounds leave for this read


async def read_key(reader: LogReader, request: KeyRead) -> ReadResult:
    return await reader.lend(lambda consumer: _read(consumer, request, reader.limits))


def _read(consumer: Consumer, request: KeyRead, limits: ReadLimits) -> ReadResult:
    start = OFFSET_BEGINNING if request.start == 0 else request.start
    consumer.assign([TopicPartition(request.topic, request.partition, start)])
    try:
        return _Collect(consumer, request, limits).run()
    except KafkaException as error:
        raise LogUnavailable(f"reading {request.topic}: {error}") from error
    finally:
        consumer.unassign()


class _Collect:
    def __init__(self, consumer: Consumer, request: KeyRead, limits: ReadLimits) -> None:
        self.consumer = consumer
        self.request = request
        self.limits = limits
        self.targets = deque(request.wanted) if request.wanted is not None else None
        self.messages: list[bytes] = []
        self.read_bytes = self.scanned = 0
        self.position = request.start

    def run(self) -> ReadResult:
        request = self.request
        while request.stop is None or self.position < request.stop:
            if self.targets is not None:
                if not self.targets:
                    return self._complete(request.stop or self.position)
                if self.targets[0] - self.position > JUMP:
                    self._jump(self.targets[0])
            batch = poll_batch(self.consumer, self.limits.timeout_s)
            if not batch:
                raise LogUnavailable(f"no data from {request.topic} before the timeout")
            done = self._take(batch)
            if done is not None:
                return done
        return self._complete(self.position)

    def _jump(self, offset: int) -> None:
        tp = TopicPartition(self.request.topic, self.request.partition, offset)
        self.consumer.seek(tp)  # drops what was fetched past here; cheaper than re-assigning
        self.position = offset

    def _take(self, batch: list[Message]) -> ReadResult | None:
        """Take the batch's records of the key; a result once the read is over."""
        for message in batch:
            offset = message.offset() or 0
            error = message.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(error)
                if offset < self.position:
                    continue  # the end as seen before a jump
                # The end of what is committed: wanted offsets not met are gone (retention).
                return self._complete(max(self.position, offset))
            if offset < self.position:
                continue  # fetched before a jump
            if self.request.stop is not None and offset >= self.request.stop:
                return self._complete(self.request.stop)
            partial = self._consider(message, offset)
            if partial is not None:
                return partial
            if self.targets and self.targets[0] - self.position > JUMP:
                return None  # jump from `run`
        return None

    def _consider(self, message: Message, offset: int) -> ReadResult | None:
        targets = self.targets
        while targets and targets[0] < offset:
            targets.popleft()  # compacted or deleted since it was indexed
        value = message.value()
        wanted = targets[0] == offset if targets else targets is None
        if wanted and value is not None and message.key() == self.request.key:
            full = self.request.budget.full(self.read_bytes, len(self.messages), len(value))
            if full or (
                self.messages and self.read_bytes + len(value) > self.limits.max_read_bytes
            ):
                return ReadResult(self.messages, offset, False)
            self.messages.append(value)
            self.read_bytes += len(value)
        if targets and targets[0] == offset:
            targets.popleft()
        self.position = offset + 1
        self.scanned += scan_cost(message)
        if self.scanned >= self.limits.max_scan_bytes:
            return ReadResult(self.messages, self.position, False)
        return None

    def _complete(self, position: int) -> ReadResult:
        return ReadResult(self.messages, position, True)
