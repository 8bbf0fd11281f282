"""What the stream driver (`streams.py`) and the read path (`reads.py`) ask of the layers below.

Typed by what they use, not by the classes that provide it: the server gives them Kafka's
(`SlotWriters`, `BucketService`, `LogReader`); the unit tier drives the same service over an
in-memory log that can fail, time out or lose the answer of any batch, with no broker.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Protocol

from adapter.log.reader import ReadLimits, ReadRequest, ReadResult, RecordPosition, TimeFound
from adapter.log.writer import WriteBatch, WriterLimits
from adapter.protocol.model import BucketMeta
from topology.naming import StateTopics
from topology.slots import SlotMap


class SlotWriting(Protocol):
    """The write slots: where decided writes are queued, and whether a slot may decide."""

    @property
    def limits(self) -> WriterLimits: ...

    def accepting(self, slot: int) -> bool:
        """Whether this instance writes the slot now."""
        ...

    def learning(self, slot: int) -> bool:
        """Whether the slot's writer is learning the outcome of a commit it answered 504."""
        ...

    def mark(self, slot: int) -> int:
        """The generation of the slot's writer here: its owner record's offset (-1: none)."""
        ...

    def enqueue(self, slot: int, batch: WriteBatch) -> WriteBatch:
        """Queue a batch without waiting for it; its future tells the outcome, its `on_commit`
        runs in commit order. Raises LogUnavailable when the slot takes nothing now."""
        ...


class StreamBuckets(Protocol):
    """The buckets a stream lives in: their topics, partitions and write slots."""

    @property
    def slots(self) -> SlotMap: ...

    @property
    def topics(self) -> StateTopics: ...

    async def require(self, bucket_id: str, create: bool, slot: int) -> BucketMeta:
        """The bucket, created first when `create` and missing."""
        ...

    def creating_stream(self, bucket_id: str) -> AbstractAsyncContextManager[None]:
        """Hold off the bucket's deletion while a stream is created in it."""
        ...

    def partitions_of(self, bucket_id: str) -> int: ...

    def topic(self, bucket_id: str) -> str: ...


class RangeReader(Protocol):
    """A range of one partition read for one key (committed records only)."""

    @property
    def limits(self) -> ReadLimits: ...

    async def read(self, request: ReadRequest) -> ReadResult: ...

    async def positions(self, request: ReadRequest) -> tuple[list[RecordPosition], ReadResult]: ...

    async def held_since(self, topic: str, partition: int, timestamp_ms: int) -> TimeFound: ...
