"""Streams of a mounted topic as a `StreamSource`: one per record key, read through the
topic's key index.

A mounted stream looks to the protocol layer like any other (`StreamMeta`): its offsets are
read positions (`topology/mount_positions.py`), its tail is the position after the key's last
indexed record, it is never closed and has no TTL. Reads walk the key's index: listed records
are fetched where they are, a range the index dropped is scanned by key. A writable mount's
appends are produced as plain records (`log/mount_writer.py`); those with idempotent-producer
headers are decided against the producer's state (`protocol/producers.py`) and committed with
its new state in one transaction, under the stream's transactional slot.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from adapter.cluster.access_relay import Reader
from adapter.log.key_index import KeyPlaces
from adapter.log.mount_reader import KeyRead, read_key
from adapter.log.mount_writer import MountWriter, Transactions, transactional_slot
from adapter.log.reader import LogReader
from adapter.protocol.appends import producer_refusal
from adapter.protocol.commands import Append, Appended, Chunk, Read, StreamRef
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.model import MountMeta, ProducerRecord, StreamMeta
from adapter.protocol.mount_keys import key_of
from adapter.protocol.mounts import append_messages
from adapter.protocol.offsets import resolve_start
from adapter.protocol.producers import Accepted, Duplicate, decide
from adapter.protocol.stream_machine import not_found
from adapter.service.hub import LiveHub
from adapter.service.mount_indexes import Indexed, MountIndexes
from adapter.service.reads import budget_left
from adapter.state.records import encode as encode_state
from adapter.tracing import transaction_span
from topology.mount_positions import position, split
from topology.wire import ProducerStamp

if TYPE_CHECKING:
    from adapter.tracing.otel import Tracing, TransactionSpan

FETCH_BATCH = 512  # listed records asked for in one fetch
MAX_STEPS = 16  # fetches or scans per read; the client continues from where it stopped


@dataclass(frozen=True)
class Step:
    """One read of one partition that a catch-up read of a key takes next."""

    partition: int
    start: int
    stop: int | None
    wanted: tuple[int, ...] | None


def next_step(places: KeyPlaces, at: int) -> Step | None:
    """What to read from position `at` on (None: nothing, `at` is the key's tail or past it)."""
    at = max(at, places.first)
    if at >= places.tail:
        return None
    if at >= places.dense_from:
        listed = places.listed_from(at, FETCH_BATCH)
        partition = split(listed[0])[0]
        offsets = tuple(split(p)[1] for p in listed if split(p)[0] == partition)
        return Step(partition, offsets[0], offsets[-1] + 1, offsets)
    partition, offset = split(at)
    dense_partition, dense_offset = split(places.dense_from)
    if partition not in places.partitions:
        later = [p for p in places.partitions if p > partition]
        return next_step(places, position(later[0], 0)) if later else None
    stop = dense_offset if partition == dense_partition else None
    return Step(partition, offset, stop, None)


class MountedStreams:
    def __init__(
        self,
        indexes: MountIndexes,
        reader: LogReader,
        sparse_reader: LogReader,
        writer: MountWriter,
        hub: LiveHub,
        transactions: Transactions,
        producers_topic: str,
        state_followed: Callable[[], Awaitable[None]],
        max_append_messages: int,
        tracing: Tracing | None = None,
    ) -> None:
        self.tracing = tracing  # None: off
        self.max_append_messages = max_append_messages  # of a JSON array, as for our streams
        self.transactions = transactions
        self.producers_topic = producers_topic
        self.state_followed = state_followed  # returns once the state topics are followed
        self.indexes = indexes
        self.reader = reader  # scans of ranges the index dropped: large fetches
        self.sparse_reader = sparse_reader  # listed records, seek by seek: small fetches
        self.writer = writer
        self.hub = hub
        self.catalog = indexes.catalog

    def covers(self, bucket_id: str) -> bool:
        return self.catalog.mount(bucket_id) is not None

    def check_change(self, ref: StreamRef) -> None:
        """A mounted topic's streams are its keys: none is created, deleted, fenced, trimmed
        or given a snapshot here (405)."""
        raise self.refuse_write(ref)

    def refuse_write(self, ref: StreamRef) -> ProtocolError:
        mount = self.catalog.mount(ref.bucket_id)
        topic = mount.topic if mount is not None else "?"
        appends = mount is not None and mount.appends
        return ProtocolError(
            ErrorCode.MOUNT_READ_ONLY,
            f"bucket {ref.bucket_id!r} mounts topic {topic!r}: its streams cannot be created"
            + (" or deleted (only appended to)" if appends else ", appended to or deleted"),
            {"Allow": "GET, HEAD, OPTIONS" + (", POST" if appends else "")},
        )

    async def append(self, command: Append) -> Appended:
        """Produce the messages as plain records keyed by the stream's key (a writable mount)."""
        ref = command.ref
        mount = self.catalog.mount(ref.bucket_id)
        if mount is None or not mount.appends:
            raise self.refuse_write(ref)
        key = key_of(ref.stream_id)
        if key is None:
            raise not_found(ref.stream_id)
        indexed = self.indexed(ref.bucket_id)
        places = indexed.index.places(ref.stream_id)
        content_type = (places.content_type if places else None) or mount.content_type
        messages = append_messages(content_type, command, self.max_append_messages)
        if command.producer is not None:
            return await self._append_once(mount, ref, key, messages, command.producer)
        async with transaction_span(self.tracing, mount.topic) as span:
            trace = None if span is None else span.traceparent
            written = await self.writer.produce(mount.topic, key, messages, trace)
            _committed(span, written)
        tail = position(*written[-1]) + 1
        return Appended(await self._indexed_up_to(ref, tail), appended=True)

    async def _append_once(
        self,
        mount: MountMeta,
        ref: StreamRef,
        key: bytes,
        messages: list[bytes],
        headers: ProducerStamp,
    ) -> Appended:
        """An append with producer headers: written at most once per (producer, epoch, seq)."""
        slot = transactional_slot(ref.bucket_id, ref.stream_id)
        async with self.transactions.slot(slot) as held:
            if held.fresh:  # whoever held the slot before is fenced: read what it committed
                await self.state_followed()
                held.fresh = False
            states = self.catalog.producer_states(ref.bucket_id, ref.stream_id)
            decision = decide(states.get(headers.producer_id), headers)
            if isinstance(decision, Duplicate):
                return Appended(self.existing(ref), appended=False, producer=decision.position)
            refusal = producer_refusal(decision)
            if refusal is not None:
                raise refusal
            assert isinstance(decision, Accepted)
            record = ProducerRecord(
                ref.bucket_id,
                ref.stream_id,
                headers.producer_id,
                decision.position.epoch,
                decision.position.last_seq,
                int(time.time() * 1000),
            )
            entry = (self.producers_topic, record.key, encode_state(record))
            async with transaction_span(self.tracing, mount.topic) as span:
                trace = None if span is None else span.traceparent
                written = await self.transactions.write(
                    held, mount.topic, key, messages, entry, trace
                )
                _committed(span, written)
            self.catalog.put_producer(record)
        tail = position(*written[-1]) + 1
        meta = await self._indexed_up_to(ref, tail)
        return Appended(meta, appended=True, producer=decision.position)

    async def _indexed_up_to(self, ref: StreamRef, tail: int) -> StreamMeta:
        """The stream once the index holds the records written (read-your-writes), or, if the
        indexer is slower than `timeout_s`, as the write left it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.writer.timeout_s
        key = (ref.bucket_id, ref.stream_id)
        while True:
            indexed = self.indexed(ref.bucket_id)
            places = indexed.index.places(ref.stream_id)
            if places is not None and places.tail >= tail:
                return _meta(indexed.mount, ref.stream_id, places)
            if loop.time() >= deadline:
                return _meta(indexed.mount, ref.stream_id, KeyPlaces(tail - 1, None))
            await self.hub.wait(key, deadline - loop.time())

    async def until_serving(self, bucket_id: str, timeout_s: float) -> bool:
        """Whether the mount serves reads within `timeout_s`: its index has caught up with
        the topic's end as it was when the index started (at once for a small topic)."""
        indexed = self.indexes.get(bucket_id)
        if indexed is None:
            return False
        ready = asyncio.ensure_future(indexed.indexer.ready.wait())
        first = asyncio.FIRST_COMPLETED  # ready, or the indexer died
        try:
            await asyncio.wait([ready, indexed.task], timeout=timeout_s, return_when=first)
        finally:
            ready.cancel()
        return indexed.indexer.caught_up and not indexed.task.done()

    def indexed(self, bucket_id: str) -> Indexed:
        indexed = self.indexes.get(bucket_id)
        if indexed is None or indexed.task.done():
            raise ProtocolError(
                ErrorCode.UNAVAILABLE, f"the index of mount {bucket_id!r} is not running; retry"
            )
        if not indexed.indexer.caught_up:
            progress = indexed.indexer.progress()
            raise ProtocolError(
                ErrorCode.NOT_READY,
                f"mount {bucket_id!r} is still being indexed: "
                f"{progress['partitions_caught_up']}/{progress['partitions']} partitions",
                {"Retry-After": "1"},
            )
        return indexed

    def existing(self, ref: StreamRef) -> StreamMeta:
        indexed = self.indexed(ref.bucket_id)
        places = indexed.index.places(ref.stream_id)
        if places is None:
            raise not_found(ref.stream_id)
        return _meta(indexed.mount, ref.stream_id, places)

    def accessed(self, ref: StreamRef, reader: Reader | None = None) -> StreamMeta:
        """The stream as `existing`: it has no TTL to renew, and every instance indexes the
        topic itself, so no owner is told of the read."""
        return self.existing(ref)

    async def latest(self, ref: StreamRef) -> StreamMeta:
        """The stream as this instance's index has it (`at_tail`)."""
        return self.existing(ref)

    async def at_tail(self, ref: StreamRef) -> StreamMeta:
        """The stream as this instance's index has it: a mounted topic's tails come from the
        index, not from the state topics."""
        return self.existing(ref)

    async def offset_at(self, ref: StreamRef, at_ms: int) -> int:
        """Where a read by time starts: the key's first record at or after the first record of
        its partitions (in read order) written at or after `at_ms`; its tail if none was. A
        moment before the topic's retention reads from its oldest record."""
        indexed = self.indexed(ref.bucket_id)
        places = indexed.index.places(ref.stream_id)
        if places is None:
            raise not_found(ref.stream_id)
        for partition in places.partitions:
            found = await self.reader.held_since(indexed.mount.topic, partition, at_ms)
            if found.offset is None:
                continue
            at = max(places.first, position(partition, found.offset))
            if at < places.dense_from or at >= places.tail:
                return min(at, places.tail)
            return places.listed_from(at, 1)[0]
        return places.tail

    async def read(self, command: Read, reader: Reader | None = None) -> Chunk:
        """The key's records from the command's start, within its bounds and `MAX_STEPS`
        fetches (the client continues from where it stopped). `reader` is not told anyone:
        every instance indexes the topic itself."""
        ref, bounds = command.ref, command.bounds
        indexed = self.indexed(ref.bucket_id)
        places = indexed.index.places(ref.stream_id)
        key = key_of(ref.stream_id)
        if places is None or key is None:
            raise not_found(ref.stream_id)
        meta = _meta(indexed.mount, ref.stream_id, places)
        first = at = resolve_start(meta, command.start)
        messages: list[bytes] = []
        size = 0
        for _ in range(MAX_STEPS):
            step = next_step(places, at)
            if step is None:
                at = max(at, meta.next_offset)
                break
            budget = budget_left(bounds, size, len(messages))
            request = KeyRead(
                indexed.mount.topic, step.partition, key, step.start, step.stop, step.wanted, budget
            )
            log_reader = self.reader if step.wanted is None else self.sparse_reader
            result = await read_key(log_reader, request)
            messages += result.messages
            size += sum(len(message) for message in result.messages)
            at = position(step.partition, result.next_offset)
            full = size >= self.reader.limits.max_read_bytes
            if not result.complete or full or bounds.reached(size, len(messages)):
                break
            if step.stop is None:  # scanned to the partition's end: on to the next one
                at = position(step.partition + 1, 0)
        at = max(first, min(at, meta.next_offset))  # stepping to a next partition overshoots
        return Chunk(meta, messages, first, at, at >= meta.next_offset)


def _meta(mount: MountMeta, stream_id: str, places: KeyPlaces) -> StreamMeta:
    return StreamMeta(
        bucket_id=mount.bucket_id,
        stream_id=stream_id,
        partition=split(places.tail - 1)[0],
        content_type=places.content_type or mount.content_type,
        created_at_ms=mount.created_at_ms,
        start_offset=0,
        next_offset=places.tail,
        last_access_ms=0,
        last_write_at_ms=0,
        message_count=0,
    )


def _committed(span: TransactionSpan | None, written: list[tuple[int, int]]) -> None:
    """The span of a mounted append's transaction: where its records went."""
    if span is not None:
        span.committed([offset for _partition, offset in written], written[0][0])
