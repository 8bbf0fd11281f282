"""Buckets and streams: each command is decided against the catalog and carried out on the log.

Every change to a stream is decided under that stream's lock, so each decision sees the state
left by the one before it. An accepted append lets the lock go once its batch is queued: the
next one is decided against the pending state (`adapter/service/chains.py`), and fails if the
batch it was decided against fails. Refusals, repeats, If-Match, create and delete decide
against committed state only. The catalog moves in commit order, from the writer loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from adapter.cluster.slot_writers import SlotWriters
from adapter.service.hub import LiveHub
from adapter.log.writer import Record, StateEntry, WriteBatch
from adapter.protocol import json_mode
from adapter.protocol.commands import (
    Append,
    Appended,
    Chunk,
    Created,
    CreateStream,
    Read,
    StreamRef,
)
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.headers import is_json
from adapter.protocol.producers import (
    Accepted,
    Decision,
    Duplicate,
    ProducerState,
    decide,
)
from adapter.protocol.stream_rules import (
    check_body,
    check_order,
    check_producer,
    check_same_config,
    closed_append,
    split_messages,
)
from adapter.service.buckets import BucketService
from adapter.service.chains import Chain, Chains, Written
from adapter.service.locks import KeyedLocks
from adapter.service.reads import ReadPath
from adapter.service.records import control_record, data_records
from adapter.service.state_entries import producer_entry, stream_entry, stream_tombstones
from adapter.state.catalog import Catalog
from adapter.state.records import ProducerRecord, StreamMeta
from topology.placement import partition_for

Clock = Callable[[], int]


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class _Write:
    """An append decided and due to be written."""

    meta: StreamMeta  # the state it was decided against
    command: Append
    messages: list[bytes]
    producer: ProducerState | None


class StreamService:
    def __init__(
        self,
        catalog: Catalog,
        writers: SlotWriters,
        buckets: BucketService,
        reads: ReadPath,
        hub: LiveHub,
        clock: Clock = wall_clock_ms,
    ) -> None:
        self.catalog = catalog
        self.writers = writers
        self.buckets = buckets
        self.slots = buckets.slots
        self.reads = reads
        self.hub = hub
        self.clock = clock
        self.topics = buckets.topics
        self._locks = KeyedLocks()
        self._chains = Chains()

    # -- lookups ---------------------------------------------------------------------------

    def live(self, ref: StreamRef) -> StreamMeta:
        """The stream, unless it does not exist or has expired (both 404)."""
        if self.catalog.bucket(ref.bucket_id) is None and not ref.create_bucket:
            raise ProtocolError(ErrorCode.BUCKET_NOT_FOUND, f"bucket {ref.bucket_id!r} not found")
        meta = self.catalog.stream(ref.bucket_id, ref.stream_id)
        if meta is None or meta.expired(self.clock()):
            raise ProtocolError(ErrorCode.STREAM_NOT_FOUND, f"stream {ref.stream_id!r} not found")
        return meta

    def touch(self, meta: StreamMeta) -> StreamMeta:
        """Renew a sliding TTL on a read or write; persisted with the stream's next write."""
        if meta.ttl_seconds is None:
            return meta
        renewed = meta.evolve(last_access_ms=self.clock())
        self.catalog.put_stream(renewed)
        return renewed

    # -- commands --------------------------------------------------------------------------

    async def create(self, command: CreateStream) -> Created:
        ref = command.ref
        await self.buckets.require(ref.bucket_id, ref.create_bucket, self._creation_slot(ref))
        async with (
            self.buckets.creating_stream(ref.bucket_id),
            self._locks.hold((ref.bucket_id, ref.stream_id)),
        ):
            await self._settle((ref.bucket_id, ref.stream_id))
            existing = self.catalog.stream(ref.bucket_id, ref.stream_id)
            if existing is not None and not existing.expired(self.clock()):
                check_same_config(existing, command)
                return Created(existing, created=False)
            # A stream created where an expired one was starts with no producer state.
            stale = stream_tombstones(self.catalog, self.topics, ref.bucket_id, ref.stream_id)
            forget = [entry for entry in stale if entry[0] == self.topics.producers]
            return Created(await self._create(command, forget), created=True)

    async def append(self, command: Append) -> Appended:
        key = (command.ref.bucket_id, command.ref.stream_id)
        async with self._locks.hold(key):
            chain = self._chains.get(key)
            if chain is not None and (chain.broken or command.if_match is not None):
                # If-Match compares the tail, which only a commit gives.
                await self._settle(key)
                chain = None
            try:
                outcome = self._decide(command, chain)
            except ProtocolError:
                if chain is None:
                    raise
                outcome = None
            if chain is not None and not isinstance(outcome, _Write):
                # Refusals and repeats answer with the committed state, never a pending one.
                await self._settle(key)
                chain = None
                outcome = self._decide(command, chain)
            if isinstance(outcome, Appended):
                return outcome
            assert outcome is not None
            batch, written = self._queue_append(outcome, chain)
        await asyncio.shield(batch.future)
        assert written.meta is not None
        return Appended(written.meta, appended=True, producer=outcome.producer)

    def _decide(self, command: Append, chain: Chain | None) -> Appended | _Write:
        """Decide an append against the stream's state after its queued appends."""
        meta = self.touch(self.live(command.ref)) if chain is None else self._pending(chain)
        decision = self._producer_decision(meta, command, chain)
        if meta.closed:
            return closed_append(meta, command, decision)
        check_body(meta, command)
        messages = split_messages(meta.content_type, command.body)
        if isinstance(decision, Duplicate):  # before Stream-Seq: a retry repeats its seq
            return Appended(meta, False, ProducerState(decision.epoch, decision.last_seq))
        check_producer(decision)
        check_order(meta, command)
        accepted = decision.state if isinstance(decision, Accepted) else None
        return _Write(meta, command, messages, accepted)

    def _pending(self, chain: Chain) -> StreamMeta:
        meta = chain.meta
        if meta.expired(self.clock()):
            raise ProtocolError(ErrorCode.STREAM_NOT_FOUND, f"stream {meta.stream_id!r} not found")
        return meta

    async def _settle(self, key: tuple[str, str]) -> None:
        await self._chains.settle(key, self.writers.limits.timeout_s * 4)

    def _producer_decision(
        self, meta: StreamMeta, command: Append, chain: Chain | None
    ) -> Decision | None:
        if command.producer is None:
            return None
        producer_id = command.producer.producer_id
        state = chain.producers.get(producer_id) if chain is not None else None
        if state is None:
            stored = self.catalog.producers(meta.bucket_id, meta.stream_id).get(producer_id)
            state = ProducerState(stored.epoch, stored.last_seq) if stored else None
        return decide(state, command.producer)

    async def delete(self, ref: StreamRef) -> None:
        async with self._locks.hold((ref.bucket_id, ref.stream_id)):
            await self._settle((ref.bucket_id, ref.stream_id))
            meta = self.live(ref)
            topic = self.buckets.topic(ref.bucket_id)
            record = control_record(topic, meta.partition, ref.stream_id, "delete")
            entries = stream_tombstones(self.catalog, self.topics, ref.bucket_id, ref.stream_id)
            slot = self.slots.of_stream(ref.bucket_id, meta.partition)
            await self.writers.submit(slot, [record], lambda _offsets: entries)
            self.catalog.drop_stream(ref.bucket_id, ref.stream_id)
            self.reads.cache.forget((ref.bucket_id, ref.stream_id))
            self.hub.notify((ref.bucket_id, ref.stream_id))

    async def head(self, ref: StreamRef) -> StreamMeta:
        """Metadata only: a HEAD does not count as an access for the sliding TTL."""
        return self.live(ref)

    async def wait_for_data(self, ref: StreamRef, position: int, timeout_s: float) -> StreamMeta:
        """The stream once its tail passes `position`, once it is closed, or when time is up.

        Waiting registers with the hub before yielding, and wake-ups come from this event
        loop, so a commit landing between the check and the wait cannot be missed.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            meta = self.touch(self.live(ref))
            remaining = deadline - loop.time()
            if meta.next_offset > position or meta.closed or remaining <= 0:
                return meta
            await self.hub.wait((ref.bucket_id, ref.stream_id), remaining)

    async def read(self, command: Read) -> Chunk:
        meta = self.touch(self.live(command.ref))
        topic = self.buckets.topic(command.ref.bucket_id)
        return await self.reads.read(topic, meta, command.start)

    async def applied(self, ref: StreamRef, next_offset: int | None, timeout_s: float) -> bool:
        """Wait until the catalog shows a write made elsewhere: the stream's tail at or past
        `next_offset`, or, when None, the stream gone. False if time ran out."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        key = (ref.bucket_id, ref.stream_id)
        while True:
            meta = self.catalog.stream(*key)
            done = (
                meta is None
                if next_offset is None
                else meta is not None and (meta.next_offset >= next_offset or meta.closed)
            )
            remaining = deadline - loop.time()
            if done or remaining <= 0:
                return done
            await self.hub.wait(key, remaining)

    async def bucket_applied(self, bucket_id: str, exists: bool, timeout_s: float) -> bool:
        """Wait until the catalog shows a bucket created (or deleted) elsewhere."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while (self.catalog.bucket(bucket_id) is not None) != exists:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            await self.hub.wait((bucket_id, ""), remaining)
        return True

    # -- writing ---------------------------------------------------------------------------

    def slot_of(self, bucket_id: str, stream_id: str) -> int:
        """The write slot of a stream, existing or about to be created."""
        meta = self.catalog.stream(bucket_id, stream_id)
        if meta is not None:
            return self.slots.of_stream(bucket_id, meta.partition)
        return self._creation_slot(StreamRef(bucket_id, stream_id))

    def _creation_slot(self, ref: StreamRef) -> int:
        """The slot of a stream about to be created (its partition follows from its id)."""
        partitions = self.buckets.partitions_of(ref.bucket_id)
        return self.slots.of_stream(
            ref.bucket_id, partition_for(ref.stream_id.encode(), partitions)
        )

    async def _create(self, command: CreateStream, forget: list[StateEntry]) -> StreamMeta:
        ref = command.ref
        bucket = await self.buckets.require(
            ref.bucket_id, ref.create_bucket, self._creation_slot(ref)
        )
        partition = partition_for(ref.stream_id.encode(), bucket.partitions)
        messages = (
            json_mode.split_initial(command.body)
            if is_json(command.content_type)
            else ([command.body] if command.body else [])
        )
        now = self.clock()
        records = [control_record(bucket.topic, partition, ref.stream_id, "create")]
        records += data_records(
            bucket.topic, partition, ref.stream_id, command.content_type, messages
        )
        if command.closed:
            records.append(control_record(bucket.topic, partition, ref.stream_id, "close"))
        template = StreamMeta(
            bucket_id=ref.bucket_id,
            stream_id=ref.stream_id,
            partition=partition,
            content_type=command.content_type,
            created_at_ms=now,
            start_offset=0,
            next_offset=0,
            last_access_ms=now,
            last_write_at_ms=now,
            closed=command.closed,
            ttl_seconds=command.ttl_seconds,
            expires_at_ms=command.expires_at_ms,
            message_count=len(messages),
        )

        def finalize(offsets: list[int]) -> StreamMeta:
            tail = offsets[len(messages)] + 1 if messages else offsets[0] + 1
            return template.evolve(start_offset=offsets[0], next_offset=tail)

        slot = self.slots.of_stream(ref.bucket_id, partition)
        meta, offsets = await self._commit(slot, records, finalize, forget=forget)
        data = offsets[1 : 1 + len(messages)]
        self.reads.cache.record(
            (ref.bucket_id, ref.stream_id), offsets[0], meta.next_offset, data, messages
        )
        return meta

    def _queue_append(self, write: _Write, chain: Chain | None) -> tuple[WriteBatch, Written]:
        """Queue the append's batch; the stream's next append may be decided at once."""
        meta, command, messages = write.meta, write.command, write.messages
        topic = self.buckets.topic(meta.bucket_id)
        records = data_records(
            topic, meta.partition, meta.stream_id, meta.content_type, messages, command.producer
        )
        if command.close:
            records.append(control_record(topic, meta.partition, meta.stream_id, "close"))
        now = self.clock()
        decided = meta.evolve(
            closed=meta.closed or command.close,
            last_seq=command.seq or meta.last_seq,
            last_write_at_ms=now,
            last_access_ms=now if meta.ttl_seconds is not None else meta.last_access_ms,
            message_count=meta.message_count + len(messages),
        )
        record = self._producer_record(write, now)
        written = Written(chain.written if chain is not None else None, meta.next_offset)

        def finalize(offsets: list[int]) -> list[StateEntry]:
            start = written.settle_start()  # in commit order: the previous batch is final
            tail = offsets[len(messages) - 1] + 1 if messages else start
            written.meta = decided.evolve(next_offset=tail)
            entries = [stream_entry(self.topics, written.meta)]
            return entries + ([producer_entry(self.topics, record)] if record else [])

        def on_commit(offsets: list[int]) -> None:
            assert written.meta is not None
            written.committed()
            if record is not None:
                self.catalog.put_producer(record)
            self.catalog.put_stream(written.meta)
            key = (meta.bucket_id, meta.stream_id)
            data = offsets[: len(messages)]
            self.reads.cache.record(key, written.start, written.meta.next_offset, data, messages)
            self.hub.notify(key)

        slot = self.slots.of_stream(meta.bucket_id, meta.partition)
        before = chain.last if chain is not None else None
        batch = self.writers.enqueue(slot, WriteBatch(records, finalize, before, on_commit))
        producer = None
        if record is not None:
            producer = (record.producer_id, ProducerState(record.epoch, record.last_seq))
        self._chains.extend((meta.bucket_id, meta.stream_id), decided, batch, written, producer)
        return batch, written

    def _producer_record(self, write: _Write, now: int) -> ProducerRecord | None:
        if write.producer is None or write.command.producer is None:
            return None
        meta = write.meta
        return ProducerRecord(
            meta.bucket_id,
            meta.stream_id,
            write.command.producer.producer_id,
            write.producer.epoch,
            write.producer.last_seq,
            now,
        )

    async def _commit(
        self,
        slot: int,
        records: list[Record],
        finalize: Callable[[list[int]], StreamMeta],
        producer: ProducerRecord | None = None,
        forget: list[StateEntry] | None = None,
    ) -> tuple[StreamMeta, list[int]]:
        """Write the records, the stream's new meta and producer state in one transaction.

        Returns the stream's new meta and the Kafka offsets of the records.
        """
        result: list[StreamMeta] = []

        def entries(offsets: list[int]) -> list[StateEntry]:
            result[:] = [finalize(offsets)]  # again with the true offsets if a guess was wrong
            state = [*(forget or []), stream_entry(self.topics, result[0])]
            return state + ([producer_entry(self.topics, producer)] if producer else [])

        offsets = await self.writers.submit(slot, records, entries)
        meta = result[0]
        for _topic, key, _value in forget or []:
            if _topic == self.topics.producers:
                self.catalog.apply_producer(key, None)
        if producer is not None:
            self.catalog.put_producer(producer)
        self.catalog.put_stream(meta)
        self.hub.notify((meta.bucket_id, meta.stream_id))
        return meta, offsets
