"""Decided writes carried out: a `Write` of the stream machine queued on its stream's write
slot as Kafka records, with the state records it leaves (`record_encoding.py`,
`state_entries.py`), and applied once it commits, in commit order, on the event loop: the
catalog, the hot tail, the producer states and the live hub.

A stream's queued appends form a chain (`pending_appends.py`): the next append is decided
against the state they leave, and its batch commits only after the one before it. The driver
(`streams.py`) decides; this module only carries out, and tells it when the slot may decide.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import TYPE_CHECKING

from adapter.cluster.routing import ROUTED_UNDER
from adapter.log.errors import LogUnavailable
from adapter.log.hot_cache import HotCache
from adapter.log.writer import LEARNING_MESSAGE, StateEntry, WriteBatch
from adapter.protocol import stream_machine as machine
from adapter.protocol.commands import StreamRef
from adapter.protocol.model import ProducerRecord, StreamMeta
from adapter.protocol.stream_log import logged_in_full
from adapter.service.hub import LiveHub
from adapter.service.interfaces import SlotWriting, StreamBuckets
from adapter.service.native_streams import Clock
from adapter.service.pending_appends import Chains, StreamKey
from adapter.service.record_encoding import write_records
from adapter.service.slot_checkpoints import CheckpointNotes
from adapter.service.state_entries import (
    position_record,
    producer_entry,
    producer_record,
    write_entries,
)
from adapter.state.catalog import Catalog
from adapter.state.format_gate import GATE
from topology.internal_records import APPENDS_ALONE_LEVEL, producer_key, snapshot_key
from topology.placement import partition_for
from topology.wire import stream_key

if TYPE_CHECKING:
    from adapter.tracing.otel import Tracing, TransactionSpan


class DecidedWrites:
    def __init__(
        self,
        catalog: Catalog,
        writers: SlotWriting,
        buckets: StreamBuckets,
        cache: HotCache,
        hub: LiveHub,
        clock: Clock,
        tracing: Tracing | None = None,
        notes: CheckpointNotes | None = None,
    ) -> None:
        self.catalog = catalog
        self.writers = writers
        self.buckets = buckets
        self.slots = buckets.slots
        self.topics = buckets.topics
        self.cache = cache  # the hot tail: a committed write's messages, for the reads after it
        self.hub = hub
        self.clock = clock
        self.tracing = tracing  # None: off, and an append pays nothing for it
        self.chains = Chains()  # each stream's queued appends
        # The streams whose commits wrote no state record, for the slot's checkpoint.
        self.notes = notes if notes is not None else CheckpointNotes(catalog, self.topics)
        self._inflight: dict[StreamKey, int] = {}  # writes with state records, not answered

    def busy(self, key: StreamKey) -> bool:
        """Whether a write of the stream (or one collecting it) that writes state records is in
        flight: a checkpoint record of the stream landing after those would be what compaction
        keeps. A pure append in flight writes none: the checkpoint's tail is below its records,
        which the next owner's scan reads (a stream appended to without a pause is
        checkpointed all the same)."""
        return key in self._inflight

    def slot(self, meta: StreamMeta) -> int:
        """The write slot of the partition holding the stream's records."""
        return self.slots.of_stream(meta.data_bucket, meta.partition)

    def creation_slot(self, ref: StreamRef) -> int:
        """The slot of a stream about to be created (its partition follows from its id)."""
        partitions = self.buckets.partitions_of(ref.bucket_id)
        return self.slots.of_stream(
            ref.bucket_id, partition_for(stream_key(ref.stream_id), partitions)
        )

    def decidable(self, bucket_id: str, partition: int | None, stream_id: str = "") -> None:
        """Refuse (503) to decide while the slot's writer learns an outcome it answered 504:
        the committed state may lack that write (`LogWriter._learn_on`). Without a partition
        (a stream not known yet) the slot is the one its creation would take."""
        if partition is None:
            slot = self.creation_slot(StreamRef(bucket_id, stream_id))
        else:
            slot = self.slots.of_stream(bucket_id, partition)
        if self.writers.learning(slot):
            raise LogUnavailable(LEARNING_MESSAGE)

    async def settle(self, key: StreamKey) -> None:
        await self.chains.settle(key, self.writers.limits.timeout_s * 4)

    async def carry_out(
        self, key: StreamKey, partition: int, write: machine.Write, forward_id: str | None = None
    ) -> StreamMeta | None:
        """Write and wait for the commit (creations and deletions, decided on committed state)."""
        offsets = await asyncio.shield(self.queue(key, partition, write, forward_id).future)
        return machine.settle(write, offsets)

    def queue(
        self, key: StreamKey, partition: int, write: machine.Write, forward_id: str | None = None
    ) -> WriteBatch:
        """Queue a decided write (an append, a creation, a fork, a closure, a deletion, a
        trim, a snapshot's publication) on its slot; its future tells the records' offsets.
        Within a traced request, the write's Kafka transaction gets a span, begun as its
        records are queued (the group commit they join is the rest of its time) and ended with
        the batch's outcome, whether or not its request still waits; each record carries the
        span's context, and so does the hot tail."""
        span = self._transaction_span(key, partition, write)
        if span is None:
            return self._queued(key, partition, write, forward_id, None)
        try:
            batch = self._queued(key, partition, write, forward_id, span)
        except BaseException as error:
            span.failed(error)
            raise
        batch.future.add_done_callback(span.ended)
        return batch

    def _transaction_span(
        self, key: StreamKey, partition: int, write: machine.Write
    ) -> TransactionSpan | None:
        if self.tracing is None:
            return None
        meta = write.state or self.catalog.stream(*key)  # a deletion: the stream before it
        assert meta is not None
        return self.tracing.transaction(self.buckets.topic(meta.data_bucket), partition)

    def _queued(
        self,
        key: StreamKey,
        partition: int,
        write: machine.Write,
        forward_id: str | None,
        span: TransactionSpan | None,
    ) -> WriteBatch:
        meta = write.state or self.catalog.stream(*key)  # a deletion: the stream before it
        assert meta is not None
        content_type = write.state.content_type if write.state is not None else ""
        topic = self.buckets.topic(meta.data_bucket)
        trace = None if span is None else span.traceparent
        records = write_records(
            topic, partition, meta.record_id, content_type, write, forward_id, trace
        )
        chain = self.chains.get(key)
        slot = self.slots.of_stream(meta.data_bucket, partition)
        alone = GATE.level >= APPENDS_ALONE_LEVEL and logged_in_full(write)
        if alone:
            finalize = _no_state
        else:
            unrecorded = self._unrecorded_producers(slot, key, write)
            finalize = partial(self._state_of, key, write, unrecorded)
        batch = WriteBatch(
            records,
            finalize=finalize,
            after=chain.last if chain is not None else None,
            on_commit=partial(
                self._committed_write, key, write, trace=trace, noted=alone, slot=slot
            ),
        )
        self._routed_here(slot)  # no await between this check and the queue
        self.writers.enqueue(slot, batch)
        if not alone:
            self._count_inflight([key, *write.collects], batch)
        if write.state is not None:
            self.chains.extend(key, write.state, batch, write.producer)
        return batch

    def _count_inflight(self, keys: list[StreamKey], batch: WriteBatch) -> None:
        for key in keys:
            self._inflight[key] = self._inflight.get(key, 0) + 1
        batch.future.add_done_callback(lambda _future: self._answered(keys))

    def _answered(self, keys: list[StreamKey]) -> None:
        for key in keys:
            left = self._inflight.pop(key) - 1
            if left:
                self._inflight[key] = left

    def _routed_here(self, slot: int) -> None:
        """Refuse (503, nothing written) a forwarded write routed on an owner record of the
        slot other than the one its writer here committed: it was sent to another generation
        of the slot's owner (`ROUTED_UNDER`), maybe this instance's own before its writer was
        renewed. Not the latest this catalog shows: the owners topic is followed, and may not
        show this instance's newest record yet while its new writer already takes writes."""
        routed = ROUTED_UNDER.get()
        if routed is not None and routed != (slot, self.writers.mark(slot)):
            raise LogUnavailable(
                f"write slot {slot} changed owner since this write was forwarded: nothing was "
                "written; retry"
            )

    def _unrecorded_producers(
        self, slot: int, key: StreamKey, write: machine.Write
    ) -> tuple[ProducerRecord, ...]:
        """The producer states of the stream that no record shows yet, for a write that
        commits the stream's state record (format level 7): those its pure appends moved,
        committed since the slot's last checkpoint or in flight before this write. Its
        `StreamMeta` puts the tail past their records, and a next owner carries a stream
        forward only from that tail: without these a producer's retry of an append it was
        not answered would be taken for a new one. (Its own producer's goes with it.)"""
        if write.state is None or GATE.level < APPENDS_ALONE_LEVEL:
            return ()  # a deletion (every producer state goes with it), or every append's own
        noted = self.notes.producers_of(slot, key)
        held = self.catalog.producer_states(*key) if noted else {}
        found = {pid: held[pid] for pid in noted if pid in held}
        chain = self.chains.get(key)
        for pid, position in chain.producers.items() if chain is not None else ():
            found[pid] = position_record(key, pid, position, write.at_ms)
        own = write.producer[0] if write.producer is not None else None
        return tuple(
            record
            for pid, record in sorted(found.items())
            if pid != own and pid not in write.forget
        )

    def _state_of(
        self,
        key: StreamKey,
        write: machine.Write,
        unrecorded: tuple[ProducerRecord, ...],
        offsets: list[int],
    ) -> list[StateEntry]:
        """The state records committed with the write, and the producer states no record
        shows yet (on the writer's thread: pure)."""
        entries = write_entries(self.topics, key, write, machine.settle(write, offsets))
        entries += [producer_entry(self.topics, record) for record in unrecorded]
        return entries

    def _committed_write(
        self,
        key: StreamKey,
        write: machine.Write,
        offsets: list[int],
        trace: bytes | None = None,
        noted: bool = False,
        slot: int = 0,
    ) -> None:
        """Apply a committed write to the catalog, the hot tail and the live hub (commit order);
        one that wrote no state record (`noted`) is noted for the slot's checkpoint."""
        settled = machine.settle(write, offsets, answered_ms=self.clock())
        for producer_id in write.forget:
            self.catalog.apply_producer(producer_key(*key, producer_id), None)
        if settled is None:
            self._forget(key)
        else:
            before = self.catalog.stream(*key)
            since = offsets[0] if write.creates or before is None else before.next_offset
            data = machine.message_offsets(write, offsets)
            self.cache.record(key, since, settled.next_offset, data, write.messages, trace)
            self.catalog.put_stream(settled)
        record = producer_record(key, write)
        if record is not None:
            self.catalog.put_producer(record)
        if noted:
            moved = None if record is None else record.producer_id
            self.notes.changed(slot, key, moved, offsets[0], offsets[-1])
            self.catalog.unrecorded.moved(key)  # kept if the note is lost (a failed hand-over)
        if write.snapshot is not None:
            self.catalog.put_snapshot(write.snapshot)
        self.hub.notify(key)
        for source_key in write.collects:
            self._forget(source_key)
            self.hub.notify(source_key)

    def _forget(self, key: StreamKey) -> None:
        """A stream deleted (or collected): its state, its snapshot pointer, its hot tail."""
        self.catalog.drop_stream(*key)
        self.catalog.apply_snapshot(snapshot_key(*key), None)
        self.cache.forget(key)
        self.notes.forget(key)


def _no_state(_offsets: list[int]) -> list[StateEntry]:
    """A pure append's state records from format level 7: none (`stream_log.logged_in_full`)."""
    return []
