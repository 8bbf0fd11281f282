"""A write slot's queue: which batches wait, which are refused, which go into a transaction.

Pure (no Kafka, no event loop, time passed in), so the policy is tested exactly. Three bounds:
- **A transaction never overflows librdkafka's queue.** Every record of a transaction waits in
  the producer's queue until the flush, and a record past `queue.buffering.max.messages` or
  `queue.buffering.max.kbytes` is refused (`BufferError`). So a transaction takes batches, in
  queue order, only while they fit its caps, set to half those queue limits; a first batch
  larger than a cap goes alone, and the largest batch a request can make still fits the queue.
- **A queue holds what can be written in time.** A batch that would take the queue past its
  bound (in batches, records or bytes) is refused at once; an empty queue takes any batch.
- **A batch that waited too long is never written.** One that has waited longer than the
  deadline is taken out unwritten (its request is answered 503), so no request waits on a
  queue that does not move.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

T = TypeVar("T")

# librdkafka's producer queue, set explicitly in the writer's configuration.
QUEUE_MESSAGES: Final = 100_000
# Counted per record beyond its key, value and headers (librdkafka counts less).
RECORD_OVERHEAD: Final = 64
# What a batch's state records (meta, producer states) may add, beside its data records.
STATE_RECORDS_PER_BATCH: Final = 4
STATE_BYTES_PER_BATCH: Final = 4096


@dataclass(frozen=True)
class Size:
    records: int
    bytes: int

    def __add__(self, other: Size) -> Size:
        return Size(self.records + other.records, self.bytes + other.bytes)


@dataclass(frozen=True)
class Caps:
    """The most a transaction (or a queue) holds; the first batch of one may exceed them."""

    batches: int
    records: int
    bytes: int

    def hold(self, size: Size, batches: int) -> bool:
        return batches <= self.batches and size.records <= self.records and size.bytes <= self.bytes


@dataclass(frozen=True)
class Policy:
    transaction: Caps
    queue: Caps
    deadline_s: float

    @property
    def queue_kbytes(self) -> int:
        """`queue.buffering.max.kbytes`: twice a transaction's bytes."""
        return 2 * self.transaction.bytes // 1024


def policy(max_message_bytes: int, timeout_s: float) -> Policy:
    """The bounds of a slot: caps at half librdkafka's queue, a queue of a few transactions.

    A transaction's bytes are at least 8 request bodies (64 MiB at least), so the largest
    request goes with others; the queue holds two transactions' bytes and four transactions'
    records. The deadline is the Kafka timeout: a batch that waited as long as a whole flush
    may take is answered 503 rather than written late.
    """
    transaction = Caps(
        batches=1000, records=QUEUE_MESSAGES // 2, bytes=max(64 << 20, 8 * max_message_bytes)
    )
    queue = Caps(batches=10_000, records=4 * transaction.records, bytes=2 * transaction.bytes)
    return Policy(transaction, queue, deadline_s=timeout_s)


def size_of(records: Iterable[tuple[bytes, bytes, int]]) -> Size:
    """A batch's size from its records' (key, value, header bytes), state records included."""
    count, total = STATE_RECORDS_PER_BATCH, STATE_BYTES_PER_BATCH
    for key, value, headers in records:
        count += 1
        total += len(key) + len(value) + headers + RECORD_OVERHEAD
    return Size(count, total)


@dataclass(frozen=True)
class _Waiting(Generic[T]):
    item: T
    size: Size
    since: float


@dataclass(frozen=True)
class Taken(Generic[T]):
    """What a transaction takes from the queue, and what waited too long to be written."""

    batches: list[T]
    expired: list[T]


class SlotQueue(Generic[T]):
    """The batches waiting for a slot's next transaction, in the order they were queued."""

    def __init__(self, bounds: Policy) -> None:
        self.bounds = bounds
        self._waiting: deque[_Waiting[T]] = deque()
        self._size = Size(0, 0)

    def __len__(self) -> int:
        return len(self._waiting)

    @property
    def size(self) -> Size:
        return self._size

    def offer(self, item: T, size: Size, now: float) -> bool:
        """Queue a batch unless that takes the queue past its bounds (an empty one takes any)."""
        if self._waiting and not self.bounds.queue.hold(self._size + size, len(self) + 1):
            return False
        self._waiting.append(_Waiting(item, size, now))
        self._size += size
        return True

    def next_deadline(self) -> float | None:
        """When the oldest waiting batch will have waited past the deadline (None: empty)."""
        return self._waiting[0].since + self.bounds.deadline_s if self._waiting else None

    def expire(self, now: float) -> list[T]:
        """Take out the batches that have waited longer than the deadline (the oldest first)."""
        expired: list[T] = []
        while self._waiting and now - self._waiting[0].since > self.bounds.deadline_s:
            expired.append(self._pop().item)
        return expired

    def take(self, now: float) -> Taken[T]:
        """The next transaction: batches in queue order while they fit the caps."""
        expired = self.expire(now)
        batches: list[T] = []
        total = Size(0, 0)
        while self._waiting:
            after = total + self._waiting[0].size
            if batches and not self.bounds.transaction.hold(after, len(batches) + 1):
                break
            batches.append(self._pop().item)
            total = after
        return Taken(batches, expired)

    def clear(self) -> list[T]:
        """Every batch still waiting (the writer is going away)."""
        items = [waiting.item for waiting in self._waiting]
        self._waiting.clear()
        self._size = Size(0, 0)
        return items

    def _pop(self) -> _Waiting[T]:
        waiting = self._waiting.popleft()
        self._size = Size(
            self._size.records - waiting.size.records, self._size.bytes - waiting.size.bytes
        )
        return waiting
