"""Streams: the async driver of the stream state machine (`adapter/protocol/stream_machine.py`),
and the choice of a bucket's stream source (`stream_source.py`).

The machine decides; this module holds the stream's lock while it does and hands the decided
write to `decided_writes.py`, which queues its records on the stream's write slot and, once
they commit, moves the catalog, the hot tail and the live hub. Every change to a stream is
decided under that stream's lock, so each decision sees the state left by the one before it.
An accepted append lets the lock go once its batch is queued: the next one is decided against
the pending state (`adapter/service/pending_appends.py`), and fails if the batch it was
decided against fails. The catalog moves in commit order, on the event loop.

Requests read and append through `source_for(bucket)`: our own streams (`native_streams.py`,
whose appends come back here) or a mounted topic's (`mounted_streams.py`), which refuses the
changes it does not take before anything is decided.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar

from adapter.cluster.access_relay import AccessRelay
from adapter.cluster.catch_up import MetaCatchUp
from adapter.protocol import forks
from adapter.protocol import stream_machine as machine
from adapter.protocol.bucket_config import bucket_etag
from adapter.protocol.commands import (
    Append,
    Appended,
    Collect,
    Created,
    CreateStream,
    DeleteStream,
    Expire,
    Fence,
    ForkFrom,
    KafkaPosition,
    PublishSnapshot,
    StreamRef,
    Trim,
)
from adapter.protocol.errors import ProtocolError
from adapter.protocol.model import BucketMeta, ProducerRecord, SnapshotPointer, StreamMeta
from adapter.protocol.offsets import resolve_start
from adapter.protocol.producers import ProducerPosition
from adapter.service.decided_writes import DecidedWrites
from adapter.service.hub import LiveHub
from adapter.service.interfaces import SlotWriting, StreamBuckets
from adapter.service.locks import KeyedLocks
from adapter.service.mounted_streams import MountedStreams
from adapter.service.native_streams import Clock, NativeStreams
from adapter.service.pending_appends import Chain, StreamKey
from adapter.service.reads import ReadPath
from adapter.service.slot_checkpoints import CheckpointNotes
from adapter.service.stream_source import StreamSource
from adapter.state.catalog import Catalog
from adapter.state.data_tails import DataTails
from adapter.state.view_age import ViewAge
from topology.placement import partition_for
from topology.wire import stream_key

if TYPE_CHECKING:
    from adapter.tracing.otel import Tracing

log = logging.getLogger(__name__)

# How far up a chain of forks a deletion looks for sources to collect (a guard, not a limit
# anyone should meet: each fork of a fork adds one range to every read of it).
MAX_FORK_DEPTH = 1000
R = TypeVar("R", Appended, Created)


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


class StreamService:
    def __init__(
        self,
        catalog: Catalog,
        writers: SlotWriting,
        buckets: StreamBuckets,
        reads: ReadPath,
        hub: LiveHub,
        view: ViewAge,
        clock: Clock = wall_clock_ms,
        limits: machine.Limits = machine.DEFAULT_LIMITS,
        mounted: MountedStreams | None = None,
        relay: AccessRelay | None = None,
        trim_settle_ms: int = 0,
        tracing: Tracing | None = None,
        catch_up: MetaCatchUp | None = None,
        tails: DataTails | None = None,
        notes: CheckpointNotes | None = None,
    ) -> None:
        self.catalog = catalog
        self.writers = writers
        self.buckets = buckets
        self.reads = reads
        self.hub = hub
        self.clock = clock
        self.machine = machine.Machine(limits, trim_settle_ms)  # the rules, and their limits
        self._locks = KeyedLocks()
        self.writes = DecidedWrites(
            catalog, writers, buckets, reads.cache, hub, clock, tracing, notes
        )
        self.native = NativeStreams(
            catalog,
            buckets,
            reads,
            view,
            clock,
            self.machine,
            self._append,
            relay=relay,
            catch_up=catch_up,
            tails=tails,
        )
        self.mounted = mounted  # buckets that are mounted topics: one stream per key
        self.tracing = tracing  # None: off, and an append pays nothing for it

    # -- sources -------------------------------------------------------------------------

    @property
    def limits(self) -> machine.Limits:
        """What one request may write: the machine's own (the edge splits bodies by them)."""
        return self.machine.limits

    def source_for(self, bucket_id: str) -> StreamSource:
        """Where the bucket's streams come from, asked once per request: a mounted topic's
        key index, or our own streams."""
        if self.mounted is not None and self.mounted.covers(bucket_id):
            return self.mounted
        return self.native

    def accessed_elsewhere(self, ref: StreamRef, at_ms: int) -> None:
        """An access at `at_ms` its owner reports (`NativeStreams.accessed_elsewhere`): only
        our own streams have a sliding TTL or an owner."""
        self.native.accessed_elsewhere(ref, at_ms)

    def _committed(self, ref: StreamRef) -> StreamMeta | None:
        """The stream as committed (None if absent), for a change of it; its bucket must exist
        unless made on demand, and take such changes (a mounted topic's do not)."""
        self.source_for(ref.bucket_id).check_change(ref)
        return self.native.committed(ref)

    # -- commands --------------------------------------------------------------------------

    async def create(self, command: CreateStream) -> Created:
        self.source_for(command.ref.bucket_id).check_change(command.ref)
        if command.fork is not None:
            return await self._fork(command, command.fork)
        ref = command.ref
        key = (ref.bucket_id, ref.stream_id)
        bucket = await self.buckets.require(
            ref.bucket_id, ref.create_bucket, self.writes.creation_slot(ref)
        )
        partition = partition_for(stream_key(ref.stream_id), bucket.partitions)
        async with self.buckets.creating_stream(ref.bucket_id), self._locks.hold(key):
            await self.writes.settle(key)
            self.writes.decidable(ref.bucket_id, partition)
            view = replace(self._view(key, self.catalog.stream(*key)), partition=partition)
            step = self.machine.apply(view, command, self.clock())
            if isinstance(step, machine.Write):
                settled = await self.writes.carry_out(key, partition, step, command.forward_id)
                assert settled is not None
                return Created(settled, created=True)
        return _reply(step, Created)

    async def _fork(self, command: CreateStream, fork: ForkFrom) -> Created:
        """Create a fork, in its source's partition, under the source's lock and its own; a
        fork of another bucket's stream keeps that bucket from being deleted meanwhile."""
        ref = command.ref
        key, source_key = (ref.bucket_id, ref.stream_id), fork.source_of(ref)
        for bucket_id in dict.fromkeys((ref.bucket_id, source_key[0])):
            if self.catalog.bucket(bucket_id) is None:
                raise machine.not_found(fork.source_id)
        async with (
            self.buckets.creating_stream(ref.bucket_id),
            self.buckets.creating_stream(source_key[0]),
            self._holding(source_key, key),
        ):
            await self.writes.settle(source_key)
            await self.writes.settle(key)
            source = self.catalog.stream(*source_key)
            if source is not None:
                self.writes.decidable(source.data_bucket, source.partition)
            view = replace(
                self._view(key, self.catalog.stream(*key)),
                source=source,
                source_snapshot=None if source is None else self.catalog.snapshot(source),
                following=await self._following(source, fork),
            )
            step = self.machine.apply(view, command, self.clock())
            if isinstance(step, machine.Write):
                assert step.state is not None
                settled = await self.writes.carry_out(
                    key, step.state.partition, step, command.forward_id
                )
                assert settled is not None
                return Created(settled, created=True)
        return _reply(step, Created)

    async def _following(self, source: StreamMeta | None, fork: ForkFrom) -> list[bytes]:
        """The source's messages from the fork offset on, when a sub-offset needs them."""
        if fork.sub_offset == 0 or source is None or source.soft_deleted:
            return []
        at = forks.cut(source, fork.offset)
        if isinstance(at, ProtocolError):
            return []  # the machine refuses it
        chunk = await self.reads.read(self.buckets.topic(source.data_bucket), source, at)
        return chunk.messages

    @contextlib.asynccontextmanager
    async def _holding(self, *keys: StreamKey) -> AsyncIterator[None]:
        """Hold the locks of several streams, ancestors first (so two holders never cross)."""
        async with contextlib.AsyncExitStack() as stack:
            for key in dict.fromkeys(keys):
                await stack.enter_async_context(self._locks.hold(key))
            yield

    def _live_forks(self, bucket_id: str, stream_id: str) -> int:
        """Forks that still need the stream's records: unexpired, or soft-deleted themselves."""
        now = self.clock()
        metas = self.catalog.forks_of(bucket_id, stream_id)
        return sum(1 for meta in metas if meta.soft_deleted or not meta.expired(now))

    def _ancestors(self, meta: StreamMeta | None) -> list[tuple[StreamMeta, int]]:
        """The streams `meta` was forked from, nearest first, with their live forks."""
        if meta is None:
            return []
        found: list[tuple[StreamMeta, int]] = []
        source_key = meta.source
        while source_key is not None and len(found) < MAX_FORK_DEPTH:
            source = self.catalog.stream(*source_key)
            if source is None:
                break
            found.append((source, self._live_forks(*source_key)))
            source_key = source.source
        return found

    async def _append(self, command: Append) -> Appended:
        """An append to one of our streams (`NativeStreams.append`): decided under its lock
        against the state its queued appends leave, answered once its batch commits."""
        key = (command.ref.bucket_id, command.ref.stream_id)
        async with self._locks.hold(key):
            step = await self._decide_append(key, command)
            if not isinstance(step, machine.Write):
                return _reply(step, Appended)
            assert step.state is not None
            topic = self.buckets.topic(step.state.data_bucket)
            batch = self.writes.queue(key, step.state.partition, step, command.forward_id)
        offsets = await asyncio.shield(batch.future)
        settled = machine.settle(step, offsets)
        assert settled is not None
        producer = step.producer[1] if step.producer is not None else None
        kafka = KafkaPosition(topic, step.state.partition, offsets[0]) if offsets else None
        return Appended(settled, appended=True, producer=producer, kafka=kafka)

    async def _decide_append(self, key: StreamKey, command: Append) -> machine.Step:
        """Decide against the pending state, or the committed one when the machine says so."""
        chain = self.writes.chains.get(key)
        if chain is not None:
            view = self._pending_view(key, chain, command)
            step = self.machine.apply(view, command, self.clock())
            if step is not machine.SETTLE:
                return step
            await self.writes.settle(key)
        meta = self._committed(command.ref)
        if meta is not None:
            self.writes.decidable(meta.data_bucket, meta.partition)
        else:
            self.writes.decidable(command.ref.bucket_id, None, command.ref.stream_id)
        step = self.machine.apply(self._view(key, meta), command, self.clock())
        self.native.held(step)  # an append is an access, answered or refused
        return step

    async def delete(self, ref: StreamRef, forward_id: str | None = None) -> None:
        key = (ref.bucket_id, ref.stream_id)
        chain = [(a.bucket_id, a.stream_id) for a, _ in self._ancestors(self._committed(ref))]
        async with self._holding(*reversed(chain), key):
            await self.writes.settle(key)
            meta = self._committed(ref)
            if meta is not None:
                self.writes.decidable(meta.data_bucket, meta.partition)
            view = replace(
                self._view(key, meta),
                forks=self._live_forks(*key),
                ancestors=self._ancestors(meta),
            )
            step = self.machine.apply(view, DeleteStream(ref), self.clock())
            if isinstance(step, machine.Refused):
                raise step.error
            assert isinstance(step, machine.Write)
            assert meta is not None
            await self.writes.carry_out(key, meta.partition, step, forward_id)

    async def collect(self, bucket_id: str, stream_id: str) -> bool:
        """Collect a soft-deleted stream whose forks are all gone (expired; deleted ones
        collect it themselves), with the soft-deleted sources above it that only it kept.
        Only the owner of its write slot does; True when it was collected."""
        key = (bucket_id, stream_id)
        meta = self.catalog.stream(*key)
        if meta is None or not meta.soft_deleted or self._live_forks(*key):
            return False  # the usual case, decided without locks
        if not self.writers.accepting(self.writes.slot(meta)):
            return False
        chain = [(a.bucket_id, a.stream_id) for a, _ in self._ancestors(meta)]
        async with self._holding(*reversed(chain), key):
            await self.writes.settle(key)
            meta = self.catalog.stream(*key)
            if meta is not None:
                self.writes.decidable(meta.data_bucket, meta.partition)
            view = replace(
                self._view(key, meta), forks=self._live_forks(*key), ancestors=self._ancestors(meta)
            )
            step = self.machine.apply(view, Collect(), self.clock())
            if not isinstance(step, machine.Write) or meta is None:
                return False
            await self.writes.carry_out(key, meta.partition, step)
        return True

    async def sweep(self) -> list[StreamKey]:
        """Collect every soft-deleted stream of this instance's slots whose forks are gone."""
        collected: list[StreamKey] = []
        for meta in self.catalog.soft_deleted():
            if await self.collect(meta.bucket_id, meta.stream_id):
                collected.append((meta.bucket_id, meta.stream_id))
        return collected

    async def expire(self, meta: StreamMeta, before_ms: int) -> bool:
        """Forget an expired stream through the log (tombstones), if this instance owns its
        write slot and no live fork reads it; True when it was forgotten."""
        key = (meta.bucket_id, meta.stream_id)
        if not self.writers.accepting(self.writes.slot(meta)):
            return False
        async with self._locks.hold(key):
            await self.writes.settle(key)
            meta_now = self.catalog.stream(*key)
            if meta_now is not None:
                self.writes.decidable(meta_now.data_bucket, meta_now.partition)
            view = replace(self._view(key, meta_now), forks=self._live_forks(*key))
            step = self.machine.apply(view, Expire(before_ms), self.clock())
            if not isinstance(step, machine.Write) or meta_now is None:
                return False
            await self.writes.carry_out(key, meta_now.partition, step)
        return True

    async def sweep_expired(self, grace_ms: int) -> list[StreamKey]:
        """Forget streams of this instance's slots that expired over `grace_ms` ago."""
        forgotten: list[StreamKey] = []
        before_ms = self.clock() - grace_ms
        for meta in list(self.catalog.expired(before_ms)):  # no cursor held over awaits
            if await self.expire(meta, before_ms):
                forgotten.append((meta.bucket_id, meta.stream_id))
        return forgotten

    async def publish(self, command: PublishSnapshot, check_only: bool = False) -> StreamMeta:
        """Make a stored blob the stream's latest snapshot (its pointer and the retention it
        moves commit in one transaction), or with `check_only` just raise what the machine
        would refuse now. Appends queued before it commit first; later ones wait for it."""
        key = (command.ref.bucket_id, command.ref.stream_id)
        if check_only:
            step = self.machine.apply(
                self._view(key, self._committed(command.ref)), command, self.clock()
            )
            if isinstance(step, machine.Refused):
                raise step.error
            return self.native.existing(command.ref)
        async with self._locks.hold(key):
            await self.writes.settle(key)
            meta = self._committed(command.ref)
            if meta is not None:
                self.writes.decidable(meta.data_bucket, meta.partition)
            view = self._view(key, meta)
            step = self.machine.apply(view, command, self.clock())
            if isinstance(step, machine.Refused):
                raise step.error
            assert isinstance(step, machine.Write)
            assert step.state is not None
            settled = await self.writes.carry_out(key, step.state.partition, step)
            assert settled is not None
            return settled

    async def fence(self, command: Fence) -> StreamMeta:
        """Set the stream's fencing token: appends queued before it commit under the old one,
        later ones wait for it and are decided against it."""
        return await self._change_state(command.ref, command)

    async def trim(self, command: Trim) -> StreamMeta:
        """Move the stream's earliest offset up to `command.before`: appends queued before it
        commit first, so they can be trimmed too."""
        command = await self._within_snapshot(command)
        return await self._change_state(command.ref, command)

    async def _within_snapshot(self, command: Trim) -> Trim:
        """The trim, as one to its snapshot's offset (which changes nothing) when it removes
        none of the stream's messages after its visible snapshot. The stream shares its
        partition: every offset from the snapshot's to its next message's names the same
        position (a trim by time names that message's own offset), and a trim past the
        snapshot's offset hides the snapshot (`StreamMeta.snapshot_offset`), which must
        follow only a trim that removed a message it does not fold. Looked up before the
        decision, and true for good: no message is ever added below the tail it was seen
        under, and the earliest offset never moves back."""
        meta = self._committed(command.ref)
        if meta is None or meta.snapshot_offset is None:
            return command
        snapshot, before = meta.snapshot_offset, resolve_start(meta, command.before)
        if not snapshot < before <= meta.next_offset:
            return command
        topic = self.buckets.topic(meta.data_bucket)
        first = await self.native.time_lookups.first_at_or_after(topic, meta, snapshot)
        return command if first < before else replace(command, before=snapshot)

    async def _change_state(self, ref: StreamRef, command: Fence | Trim) -> StreamMeta:
        """A change of the stream's state alone (no record in its partition), decided on its
        committed state and written in one transaction, as every other change of it."""
        key = (ref.bucket_id, ref.stream_id)
        async with self._locks.hold(key):
            await self.writes.settle(key)
            meta = self._committed(ref)
            if meta is not None:
                self.writes.decidable(meta.data_bucket, meta.partition)
            step = self.machine.apply(self._view(key, meta), command, self.clock())
            if not isinstance(step, machine.Write):
                return _reply(step, Appended).meta
            assert step.state is not None
            settled = await self.writes.carry_out(key, step.state.partition, step)
            assert settled is not None
            return settled

    def snapshot(self, meta: StreamMeta) -> SnapshotPointer | None:
        """The stream's visible snapshot, if one was published."""
        return self.catalog.snapshot(meta)

    # -- waiting for changes ---------------------------------------------------------------

    async def wait_for_data(
        self, source: StreamSource, ref: StreamRef, position: int, timeout_s: float
    ) -> StreamMeta:
        """The stream (as `source` has it) once its tail passes `position`, once it is closed,
        or when time is up.

        Waiting registers with the hub before yielding, and wake-ups come from this event
        loop, so a commit landing between the check and the wait cannot be missed.
        """
        found: list[StreamMeta] = []

        def moved() -> bool:
            found[:] = [source.accessed(ref)]
            return found[0].next_offset > position or found[0].closed

        await self._wait_until((ref.bucket_id, ref.stream_id), moved, timeout_s)
        return found[0]

    async def applied(self, ref: StreamRef, next_offset: int | None, timeout_s: float) -> bool:
        """Wait until the catalog shows a write made elsewhere: the stream's tail at or past
        `next_offset`, or, when None, the stream gone. False if time ran out."""
        key = (ref.bucket_id, ref.stream_id)
        if next_offset is not None:  # from the stream's records, not its metadata
            began = asyncio.get_running_loop().time()
            await self.native.learned(ref, next_offset, timeout_s)
            timeout_s -= asyncio.get_running_loop().time() - began

        def shown() -> bool:
            meta = self.catalog.stream(*key)
            if next_offset is None:
                return meta is None
            return meta is not None and (meta.next_offset >= next_offset or meta.closed)

        return await self._wait_until(key, shown, timeout_s)

    async def reflects(
        self,
        ref: StreamRef,
        next_offset: int | None,
        closed: bool,
        timeout_s: float,
        gone: bool = False,
    ) -> bool:
        """Wait until the catalog shows a stream as its owner just described it: its tail at or
        past `next_offset` and closed if it is (None: the stream absent; `gone`: deleted, its
        forks living on). False if time ran out. A stream that has expired here counts as
        absent (expiry is not written anywhere: nothing would ever remove it)."""
        key = (ref.bucket_id, ref.stream_id)
        if next_offset is not None and not gone:
            began = asyncio.get_running_loop().time()
            await self.native.learned(ref, next_offset, timeout_s)
            timeout_s -= asyncio.get_running_loop().time() - began

        def shown() -> bool:
            meta = self.catalog.stream(*key)
            if gone:
                return meta is None or meta.soft_deleted
            if next_offset is None:
                return meta is None or meta.expired(self.clock())
            return (
                meta is not None and meta.next_offset >= next_offset and (meta.closed or not closed)
            )

        return await self._wait_until(key, shown, timeout_s)

    async def snapshot_applied(self, ref: StreamRef, offset: int, timeout_s: float) -> bool:
        """Wait until the catalog shows a snapshot published elsewhere at `offset` (or a later
        one). Its pointer arrives on its own topic, which wakes no one: checked every 50 ms."""
        key = (ref.bucket_id, ref.stream_id)

        def shown() -> bool:
            meta = self.catalog.stream(*key)
            pointer = None if meta is None else self.catalog.snapshot(meta)
            return pointer is not None and pointer.offset >= offset

        return await self._wait_until(key, shown, timeout_s, poll_s=0.05)

    async def trim_applied(self, ref: StreamRef, earliest: int, timeout_s: float) -> bool:
        """Wait until the catalog shows a trim made elsewhere: the stream's earliest offset at
        or past `earliest` (or the stream gone). Checked every 50 ms as well as on wake-ups."""
        key = (ref.bucket_id, ref.stream_id)

        def shown() -> bool:
            meta = self.catalog.stream(*key)
            return meta is None or meta.earliest_offset >= earliest

        return await self._wait_until(key, shown, timeout_s, poll_s=0.05)

    async def bucket_applied(
        self, bucket_id: str, exists: bool, timeout_s: float, etag: str | None = None
    ) -> bool:
        """Wait until the catalog shows a bucket (or mount) created or deleted elsewhere, and
        with `etag` when given (a configuration changed elsewhere)."""

        def shown() -> bool:
            found = self.catalog.bucket(bucket_id) or self.catalog.mount(bucket_id)
            if etag is not None:
                return isinstance(found, BucketMeta) and bucket_etag(found) == etag
            return (found is not None) == exists

        return await self._wait_until((bucket_id, ""), shown, timeout_s)

    async def _wait_until(
        self,
        key: StreamKey,
        done: Callable[[], bool],
        timeout_s: float,
        poll_s: float | None = None,
    ) -> bool:
        """Check `done` each time the hub says the key changed (and every `poll_s`, if given),
        until it holds or time is up."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            if done():
                return True
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            if self.hub.stopping:
                return False
            await self.hub.wait(key, remaining if poll_s is None else min(remaining, poll_s))

    # -- writing ---------------------------------------------------------------------------

    def slot_of(
        self, bucket_id: str, stream_id: str, forked_from: tuple[str, str] | None = None
    ) -> int:
        """The write slot of a stream, existing or about to be created (a fork's is its
        source's: it lives in the source's partition)."""
        meta = self.catalog.stream(bucket_id, stream_id)
        if meta is None and forked_from is not None:
            meta = self.catalog.stream(*forked_from)
        if meta is not None:
            return self.writes.slot(meta)
        return self.writes.creation_slot(StreamRef(bucket_id, stream_id))

    def _view(self, key: StreamKey, meta: StreamMeta | None) -> machine.View:
        """The committed state a command is decided against (the catalog's, not copied)."""
        return machine.View(meta, self.catalog.producer_states(*key))

    def _pending_view(self, key: StreamKey, chain: Chain, command: Append) -> machine.View:
        """The state the stream's queued appends will leave: only the command's producer is
        looked up (an append decides on no other)."""
        producers: dict[str, ProducerPosition | ProducerRecord] = {}
        if command.producer is not None:
            producer_id = command.producer.producer_id
            state = chain.producers.get(producer_id) or self.catalog.producer_states(*key).get(
                producer_id
            )
            if state is not None:
                producers[producer_id] = state
        return machine.View(chain.meta, producers, pending=True, broken=chain.broken)


def _reply(step: machine.Step, kind: type[R]) -> R:
    """The reply of a step that writes nothing: its result, or its refusal raised."""
    if isinstance(step, machine.Refused):
        raise step.error
    assert isinstance(step, machine.Done)
    assert isinstance(step.reply, kind)
    return step.reply
