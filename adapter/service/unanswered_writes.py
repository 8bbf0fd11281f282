"""Learning what became of an append forwarded to an owner that never answered.

An instance that forwards an append to its slot's owner tags it with a forward id, which the
owner writes on each of the append's records (`topology.wire`). If the owner dies, or stops
answering, after it may have committed, saying 503 would be a lie when it did (the client's
retry writes it twice), and 2xx a lie when it did not. So the forwarder waits for the slot's
next owner: it writes an owner record only after fencing every earlier holder of the slot's
transactional id, which ends their transactions. Then the partition, read `read_committed`
from the stream's tail as the forwarder knew it, says for good whether the append is there
(`adapter/log/outcomes.py`). Where Kafka freed records past that tail meanwhile, the stream's
metadata says whether any of them were its own (`_none_freed`).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from adapter.log import outcomes
from adapter.log.errors import LogUnavailable
from adapter.log.outcomes import Forwarded, Probe
from adapter.protocol.commands import StreamRef
from adapter.service.buckets import BucketService
from adapter.state.catalog import Catalog
from topology.kafka_client import KafkaAccess
from topology.placement import partition_for
from topology.wire import stream_key

POLL_S = 0.1
# Appends of one stream whose owner went silent are learned together: a search waits this long
# for the others (they notice the new owner within one POLL_S of each other).
BATCH_S = 0.2


@dataclass(slots=True)
class _Batch:
    """The appends of one stream whose outcome one read of its partition looks for."""

    since: dict[str, int] = field(default_factory=dict)  # forward id: the tail before it
    search: asyncio.Future[dict[str, Forwarded | None] | None] | None = None


@dataclass(frozen=True)
class Sent:
    """What the forwarder knew when it sent an append to the slot's owner."""

    ref: StreamRef
    slot: int
    forward_id: str
    mark: int  # the slot's owner mark then (`Catalog.owner_mark`)
    where: Probe | None  # the stream's partition and tail then; None if unknown here
    created_at_ms: int | None = None  # the stream's incarnation then; None if unknown here


class UnansweredWrites:
    """Tags forwarded appends, and finds out what became of one whose owner went silent."""

    def __init__(
        self,
        catalog: Catalog,
        buckets: BucketService,
        kafka: KafkaAccess,
        timeout_s: float,
        takeover_s: float,
        caught_up: Callable[[], Awaitable[None]],
        seen_written: Callable[[float], Awaitable[None]],
    ) -> None:
        self.catalog = catalog
        self.caught_up = caught_up  # the catalog holds all the state topics hold now
        # ... and every commit of the meta topic acknowledged before now, its markers written
        # or not (within the bound given, else LogUnavailable)
        self.seen_written = seen_written
        self.buckets = buckets
        self.kafka = kafka
        self.timeout_s = timeout_s  # one search of the partition
        self.takeover_s = takeover_s  # how long the slot may take to get its next owner
        self._batches: dict[tuple[str, int, bytes], _Batch] = {}  # searches gathering appends

    def sent(self, ref: StreamRef, slot: int) -> Sent:
        """Note what is known before forwarding (the id goes to the owner as a header)."""
        meta = self.catalog.stream(ref.bucket_id, ref.stream_id)
        created_at_ms = None if meta is None else meta.created_at_ms
        mark = self.catalog.owner_mark(slot)
        return Sent(ref, slot, uuid.uuid4().hex, mark, self._where(ref), created_at_ms)

    async def learn(self, sent: Sent) -> Forwarded | None:
        """Whether the append was written; None if that could not be learned in time."""
        if not await self._next_owner(sent):
            return None
        if sent.where is None:  # a creation (or a stream not known here yet): catch up first
            await asyncio.wait_for(self.caught_up(), self.timeout_s + 1)
        # Unknown here before: what it wrote is somewhere after the stream's creation, or (a
        # deletion, the stream now gone) anywhere in the partition its id is placed in.
        where = sent.where or self._where(sent.ref, from_start=True) or self._placed(sent.ref)
        if where is None:  # no such bucket, all the state topics applied: nothing was written
            return Forwarded(written=False, last_data=None, closed=False, tail=0)
        known = self.catalog.stream(sent.ref.bucket_id, sent.ref.stream_id)
        key = stream_key(sent.ref.stream_id if known is None else known.record_id)
        batch = self._batches.get((where.topic, where.partition, key))
        if batch is None:
            batch = _Batch()
            self._batches[(where.topic, where.partition, key)] = batch
            batch.search = asyncio.ensure_future(self._search(where, key, batch))
        batch.since[sent.forward_id] = where.offset
        search = batch.search
        assert search is not None  # set as the batch was made
        try:
            found = await asyncio.wait_for(asyncio.shield(search), self.timeout_s + 1 + BATCH_S)
        except TimeoutError:
            return None  # the broker did not let the search finish: unknown
        if found is None:
            return None
        answer = found[sent.forward_id]
        if answer is None and await self._none_freed(sent):
            return Forwarded(written=False, last_data=None, closed=False, tail=where.offset)
        return answer

    async def _none_freed(self, sent: Sent) -> bool:
        """Whether none of the stream's records after `sent.where` (its tail before the append)
        were freed, so a search from Kafka's log start above that tail found the append if it
        is there: a quiet stream's tail lies below the log start when other streams' records
        were freed past it. Before Kafka frees any of a slot's records, its owner checkpoints
        every stream the range holds records of (`service/slot_checkpoints.py`), and frees
        them only once that commit is acknowledged: with every acknowledged commit of the meta
        topic followed, a stream whose tail still stands at `where` had none there."""
        try:
            await self.seen_written(self.timeout_s)
        except LogUnavailable:
            return False
        meta = self.catalog.stream(sent.ref.bucket_id, sent.ref.stream_id)
        if meta is None or sent.where is None or meta.created_at_ms != sent.created_at_ms:
            return False  # gone, or made anew: its tail then says nothing of this one's
        return meta.next_offset <= sent.where.offset

    async def _search(
        self, where: Probe, key: bytes, batch: _Batch
    ) -> dict[str, outcomes.Forwarded | None] | None:
        """One read of the partition for every append of the stream asked about meanwhile."""
        await asyncio.sleep(BATCH_S)  # the others that lost their owner with this one join
        del self._batches[(where.topic, where.partition, key)]
        search = asyncio.to_thread(
            outcomes.forwarded_all,
            self.kafka,
            where.topic,
            where.partition,
            key,
            dict(batch.since),
            self.timeout_s,
        )
        return await asyncio.wait_for(search, self.timeout_s + 1)

    async def _next_owner(self, sent: Sent) -> bool:
        """Wait until an owner record newer than the one seen before forwarding is applied."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.takeover_s
        while self.catalog.owner_mark(sent.slot) <= sent.mark:
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(POLL_S)
        return True

    def _placed(self, ref: StreamRef) -> Probe | None:
        """The start of the partition the stream's id is placed in (a fork's is its source's,
        which is not known once it is gone: such a fork is looked for in the wrong place)."""
        bucket = self.catalog.bucket(ref.bucket_id)
        if bucket is None:
            return None
        return Probe(bucket.topic, partition_for(stream_key(ref.stream_id), bucket.partitions), 0)

    def _where(self, ref: StreamRef, from_start: bool = False) -> Probe | None:
        meta = self.catalog.stream(ref.bucket_id, ref.stream_id)
        if meta is None:
            return None
        topic = self.buckets.topic(meta.data_bucket)
        return Probe(topic, meta.partition, meta.start_offset if from_start else meta.next_offset)
