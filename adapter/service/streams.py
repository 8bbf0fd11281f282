"""Buckets and streams: each command is decided against the catalog and carried out on the log.

Every change to a stream runs under that stream's lock, from validation until its transaction
has committed and the catalog holds the result, so each decision sees the state left by the one
before it, and the meta record committed with the data always describes the latest state.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from adapter.live.hub import LiveHub
from adapter.log.writer import LogWriter, Record, StateEntry
from adapter.protocol import json_mode
from adapter.protocol.caching import etag, if_match_matches
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
from adapter.protocol.headers import content_types_match, is_json, seq_is_greater
from adapter.protocol.offsets import encode
from adapter.protocol.producers import (
    Accepted,
    Decision,
    Duplicate,
    EpochMustStartAtZero,
    ProducerState,
    SequenceGap,
    StaleEpoch,
    decide,
)
from adapter.service.buckets import BucketService
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


class StreamService:
    def __init__(
        self,
        catalog: Catalog,
        writer: LogWriter,
        buckets: BucketService,
        reads: ReadPath,
        hub: LiveHub,
        clock: Clock = wall_clock_ms,
    ) -> None:
        self.catalog = catalog
        self.writer = writer
        self.buckets = buckets
        self.reads = reads
        self.hub = hub
        self.clock = clock
        self.topics = buckets.topics
        self._locks = KeyedLocks()

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
        await self.buckets.require(ref.bucket_id, create=ref.create_bucket)
        async with (
            self.buckets.creating_stream(ref.bucket_id),
            self._locks.hold((ref.bucket_id, ref.stream_id)),
        ):
            existing = self.catalog.stream(ref.bucket_id, ref.stream_id)
            if existing is not None and not existing.expired(self.clock()):
                _check_same_config(existing, command)
                return Created(existing, created=False)
            # A stream created where an expired one was starts with no producer state.
            stale = stream_tombstones(self.catalog, self.topics, ref.bucket_id, ref.stream_id)
            forget = [entry for entry in stale if entry[0] == self.topics.producers]
            return Created(await self._create(command, forget), created=True)

    async def append(self, command: Append) -> Appended:
        ref = command.ref
        async with self._locks.hold((ref.bucket_id, ref.stream_id)):
            meta = self.touch(self.live(ref))
            decision = self._producer_decision(meta, command)
            if meta.closed:
                return _closed_append(meta, command, decision)
            _check_body(meta, command)
            messages = _split(meta.content_type, command.body)
            if isinstance(decision, Duplicate):  # before Stream-Seq: a retry repeats its seq
                return Appended(meta, False, ProducerState(decision.epoch, decision.last_seq))
            _check_producer(decision)
            _check_order(meta, command)
            accepted = decision.state if isinstance(decision, Accepted) else None
            written = await self._append(meta, command, messages, accepted)
            return Appended(written, appended=True, producer=accepted)

    def _producer_decision(self, meta: StreamMeta, command: Append) -> Decision | None:
        if command.producer is None:
            return None
        stored = self.catalog.producers(meta.bucket_id, meta.stream_id).get(
            command.producer.producer_id
        )
        state = ProducerState(stored.epoch, stored.last_seq) if stored else None
        return decide(state, command.producer)

    async def delete(self, ref: StreamRef) -> None:
        async with self._locks.hold((ref.bucket_id, ref.stream_id)):
            meta = self.live(ref)
            topic = self.buckets.topic(ref.bucket_id)
            record = control_record(topic, meta.partition, ref.stream_id, "delete")
            entries = stream_tombstones(self.catalog, self.topics, ref.bucket_id, ref.stream_id)
            await self.writer.submit([record], lambda _offsets: entries)
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

    # -- writing ---------------------------------------------------------------------------

    async def _create(self, command: CreateStream, forget: list[StateEntry]) -> StreamMeta:
        ref = command.ref
        bucket = await self.buckets.require(ref.bucket_id, create=ref.create_bucket)
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

        meta, offsets = await self._commit(records, finalize, forget=forget)
        data = offsets[1 : 1 + len(messages)]
        self.reads.cache.record(
            (ref.bucket_id, ref.stream_id), offsets[0], meta.next_offset, data, messages
        )
        return meta

    async def _append(
        self,
        meta: StreamMeta,
        command: Append,
        messages: list[bytes],
        producer: ProducerState | None,
    ) -> StreamMeta:
        topic = self.buckets.topic(meta.bucket_id)
        records = data_records(topic, meta.partition, meta.stream_id, meta.content_type, messages)
        if command.close:
            records.append(control_record(topic, meta.partition, meta.stream_id, "close"))
        now = self.clock()

        def finalize(offsets: list[int]) -> StreamMeta:
            return meta.evolve(
                next_offset=offsets[len(messages) - 1] + 1 if messages else meta.next_offset,
                closed=meta.closed or command.close,
                last_seq=command.seq or meta.last_seq,
                last_write_at_ms=now,
                last_access_ms=now if meta.ttl_seconds is not None else meta.last_access_ms,
                message_count=meta.message_count + len(messages),
            )

        record = None
        if producer is not None and command.producer is not None:
            record = ProducerRecord(
                meta.bucket_id,
                meta.stream_id,
                command.producer.producer_id,
                producer.epoch,
                producer.last_seq,
                now,
            )
        written, offsets = await self._commit(records, finalize, record)
        key = (meta.bucket_id, meta.stream_id)
        data = offsets[: len(messages)]
        self.reads.cache.record(key, meta.next_offset, written.next_offset, data, messages)
        return written

    async def _commit(
        self,
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
            result.append(finalize(offsets))
            state = [*(forget or []), stream_entry(self.topics, result[0])]
            return state + ([producer_entry(self.topics, producer)] if producer else [])

        offsets = await self.writer.submit(records, entries)
        meta = result[0]
        for _topic, key, _value in forget or []:
            if _topic == self.topics.producers:
                self.catalog.apply_producer(key, None)
        if producer is not None:
            self.catalog.put_producer(producer)
        self.catalog.put_stream(meta)
        self.hub.notify((meta.bucket_id, meta.stream_id))
        return meta, offsets


def stream_etag(meta: StreamMeta) -> str:
    """The stream's current ETag (If-Match on append compares against it)."""
    internal = f"{meta.bucket_id}/{meta.stream_id}@{meta.start_offset}"
    return etag(internal, encode(meta.start_offset), encode(meta.next_offset), meta.closed)


def _check_same_config(existing: StreamMeta, command: CreateStream) -> None:
    same = (
        content_types_match(existing.content_type, command.content_type)
        and existing.ttl_seconds == command.ttl_seconds
        and existing.expires_at_ms == command.expires_at_ms
        and existing.closed == command.closed
    )
    if not same:
        raise ProtocolError(
            ErrorCode.STREAM_EXISTS,
            f"stream {existing.stream_id!r} exists with another configuration",
        )


def _closed_append(meta: StreamMeta, command: Append, decision: Decision | None) -> Appended:
    """On a closed stream only a repeat succeeds: a close-only, or the closing request's retry."""
    if isinstance(decision, Duplicate):
        return Appended(meta, False, ProducerState(decision.epoch, decision.last_seq))
    if isinstance(decision, StaleEpoch):
        _check_producer(decision)
    if command.close and not command.body and decision is None:
        return Appended(meta, appended=False)
    raise ProtocolError(
        ErrorCode.STREAM_CLOSED,
        f"stream {meta.stream_id!r} is closed",
        headers={"Stream-Closed": "true", "Stream-Next-Offset": encode(meta.next_offset)},
    )


def _check_body(meta: StreamMeta, command: Append) -> None:
    if not command.body and not command.close:
        raise ProtocolError(ErrorCode.EMPTY_BODY, "an append needs a body (or Stream-Closed: true)")
    if command.body:
        if command.content_type is None:
            raise ProtocolError(ErrorCode.BAD_REQUEST, "Content-Type is required with a body")
        if not content_types_match(meta.content_type, command.content_type):
            raise ProtocolError(
                ErrorCode.CONTENT_TYPE_MISMATCH,
                f"stream has Content-Type {meta.content_type!r}, not {command.content_type!r}",
            )


def _check_order(meta: StreamMeta, command: Append) -> None:
    if command.seq is not None and not seq_is_greater(command.seq, meta.last_seq):
        raise ProtocolError(
            ErrorCode.SEQUENCE_CONFLICT,
            f"Stream-Seq {command.seq!r} is not greater than {meta.last_seq!r}",
        )
    if command.if_match is not None and not if_match_matches(command.if_match, stream_etag(meta)):
        raise ProtocolError(ErrorCode.PRECONDITION_FAILED, "the stream changed (If-Match)")


def _check_producer(decision: Decision | None) -> None:
    """Raise the refusal a producer decision stands for (accepted and absent pass)."""
    if isinstance(decision, StaleEpoch):
        raise ProtocolError(
            ErrorCode.STALE_PRODUCER_EPOCH,
            f"producer epoch is stale: the current epoch is {decision.current_epoch}",
            headers={"Producer-Epoch": str(decision.current_epoch)},
        )
    if isinstance(decision, SequenceGap):
        raise ProtocolError(
            ErrorCode.PRODUCER_SEQUENCE_GAP,
            f"expected Producer-Seq {decision.expected}, got {decision.received}",
            headers={
                "Producer-Expected-Seq": str(decision.expected),
                "Producer-Received-Seq": str(decision.received),
            },
        )
    if isinstance(decision, EpochMustStartAtZero):
        raise ProtocolError(
            ErrorCode.INVALID_PRODUCER_EPOCH,
            f"a new producer epoch ({decision.epoch}) must start at Producer-Seq 0",
        )


def _split(content_type: str, body: bytes) -> list[bytes]:
    if not body:
        return []
    return json_mode.split_append(body) if is_json(content_type) else [body]
