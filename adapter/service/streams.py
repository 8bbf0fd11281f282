"""Streams: the async driver of the stream state machine (`adapter/protocol/stream_machine.py`).

The machine decides; this module holds the stream's lock while it does, hands the records to the
stream's write slot, and once they commit moves the catalog, the hot tail and the live hub.
Every change to a stream is decided under that stream's lock, so each decision sees the state
left by the one before it. An accepted append lets the lock go once its batch is queued: the
next one is decided against the pending state (`adapter/service/pending_appends.py`), and fails
if the batch it was decided against fails. The catalog moves in commit order, on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, TypeVar

from adapter.cluster.access_relay import AccessRelay, Reader
from adapter.cluster.catch_up import MetaCatchUp
from adapter.cluster.routing import ROUTED_UNDER
from adapter.log.errors import LogUnavailable
from adapter.log.writer import LEARNING_MESSAGE, StateEntry, WriteBatch
from adapter.protocol import forks
from adapter.protocol import stream_machine as machine
from adapter.protocol.bucket_config import bucket_etag
from adapter.protocol.commands import (
    Access,
    Append,
    Appended,
    Chunk,
    Collect,
    Created,
    CreateStream,
    DeleteStream,
    Expire,
    Fence,
    ForkFrom,
    KafkaPosition,
    PublishSnapshot,
    Read,
    StreamRef,
    Trim,
)
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.model import BucketMeta, ProducerRecord, SnapshotPointer, StreamMeta
from adapter.protocol.offsets import resolve_start
from adapter.protocol.producers import ProducerPosition
from adapter.service.hub import LiveHub
from adapter.service.interfaces import SlotWriting, StreamBuckets
from adapter.service.locks import KeyedLocks
from adapter.service.mounted_streams import MountedStreams
from adapter.service.pending_appends import Chain, Chains, StreamKey
from adapter.service.reads import ReadPath
from adapter.service.record_encoding import write_records
from adapter.service.state_entries import producer_record, write_entries
from adapter.service.time_lookups import TimeLookups
from adapter.state.catalog import Catalog
from adapter.state.view_age import ViewAge
from topology.internal_records import producer_key, snapshot_key
from topology.placement import partition_for
from topology.wire import stream_key

if TYPE_CHECKING:
    from adapter.tracing.otel import Tracing, TransactionSpan

log = logging.getLogger(__name__)

Clock = Callable[[], int]
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
    ) -> None:
        self.catalog = catalog
        self.writers = writers
        self.buckets = buckets
        self.slots = buckets.slots
        self.reads = reads
        self.time_lookups = TimeLookups(reads)
        self.hub = hub
        self.view = view  # how recently every acknowledged change was known to be followed
        self.clock = clock
        self.limits = limits
        self.machine = machine.Machine(limits, trim_settle_ms)  # the rules, and their limits
        self.topics = buckets.topics
        self._locks = KeyedLocks()
        self._chains = Chains()
        self.mounted = mounted  # buckets that are mounted topics: read-only, one stream per key
        self.relay = relay  # tells other instances' streams' owners of reads served here
        self.tracing = tracing  # None: off, and an append pays nothing for it
        # Follows the meta topic to now unless a stream's slot is written here; None: a
        # process on its own log, nothing to follow.
        self.catch_up = catch_up

    # -- lookups ---------------------------------------------------------------------------

    def existing(self, ref: StreamRef) -> StreamMeta:
        """The stream, unless it does not exist or has expired (both 404)."""
        if self.mounted is not None and self.mounted.covers(ref.bucket_id):
            return self.mounted.existing(ref)
        meta = self._committed(ref)
        if meta is not None and meta.soft_deleted:
            raise machine.gone(ref.stream_id)
        if meta is None or meta.expired(self.clock()):
            raise machine.not_found(ref.stream_id)
        return meta

    # -- accesses (sliding TTL) --------------------------------------------------------------

    def accessed(self, ref: StreamRef, reader: Reader | None = None) -> StreamMeta:
        """A read of the stream served here, the door every read path goes through: the stream
        (404 or 410 as `existing`) with its sliding TTL started again (the machine's `Access`).

        Given the `reader` (once per request, by the edge), the read is also told to the
        stream's owner when that is another instance (`AccessRelay`), judged on the stream as
        known here even if it looks expired: the owner decides expiry.
        """
        if reader is not None and self.relay is not None:
            meta = self.catalog.stream(ref.bucket_id, ref.stream_id)
            if meta is not None:
                self.relay.read(meta, self._slot(meta), reader)
        return self._renewed(self.existing(ref), self.clock())

    def accessed_elsewhere(self, ref: StreamRef, at_ms: int) -> None:
        """An access at `at_ms` its owner reports (a sibling worker's answer to a read asked of
        it), applied here too, even to a stream that looks expired here."""
        meta = self.catalog.stream(ref.bucket_id, ref.stream_id)
        if meta is not None:
            self._renewed(meta, at_ms)

    def _renewed(self, meta: StreamMeta, at_ms: int) -> StreamMeta:
        """The stream after an access at `at_ms`, as the machine decides it."""
        step = self.machine.apply(machine.View(meta), Access(at_ms), at_ms)
        return self._held(step) or meta

    def _held(self, step: machine.Step) -> StreamMeta | None:
        """Carry out the renewal a step says, if any: held in the catalog, written with the
        stream's next write."""
        renewed = machine.renewal(step)
        if renewed is not None:
            self.catalog.put_stream(renewed)
        return renewed

    def _committed(self, ref: StreamRef) -> StreamMeta | None:
        """The stream as committed (None if absent); its bucket must exist unless made on demand.
        A mounted topic's streams have no such state: the commands that need it are refused."""
        self._refuse_if_mounted(ref)
        if self.catalog.bucket(ref.bucket_id) is None and not ref.create_bucket:
            raise ProtocolError(ErrorCode.BUCKET_NOT_FOUND, f"bucket {ref.bucket_id!r} not found")
        return self.catalog.stream(ref.bucket_id, ref.stream_id)

    def _refuse_if_mounted(self, ref: StreamRef) -> None:
        if self.mounted is not None and self.mounted.covers(ref.bucket_id):
            raise self.mounted.refuse_write(ref)

    # -- commands --------------------------------------------------------------------------

    async def create(self, command: CreateStream) -> Created:
        self._refuse_if_mounted(command.ref)
        if command.fork is not None:
            return await self._fork(command, command.fork)
        ref = command.ref
        key = (ref.bucket_id, ref.stream_id)
        bucket = await self.buckets.require(
            ref.bucket_id, ref.create_bucket, self._creation_slot(ref)
        )
        partition = partition_for(stream_key(ref.stream_id), bucket.partitions)
        async with self.buckets.creating_stream(ref.bucket_id), self._locks.hold(key):
            await self._settle(key)
            self._decidable(ref.bucket_id, partition)
            view = replace(self._view(key, self.catalog.stream(*key)), partition=partition)
            step = self.machine.apply(view, command, self.clock())
            if isinstance(step, machine.Write):
                settled = await self._carry_out(key, partition, step, command.forward_id)
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
            await self._settle(source_key)
            await self._settle(key)
            source = self.catalog.stream(*source_key)
            if source is not None:
                self._decidable(source.data_bucket, source.partition)
            view = replace(
                self._view(key, self.catalog.stream(*key)),
                source=source,
                source_snapshot=None if source is None else self.catalog.snapshot(source),
                following=await self._following(source, fork),
            )
            step = self.machine.apply(view, command, self.clock())
            if isinstance(step, machine.Write):
                assert step.state is not None
                settled = await self._carry_out(key, step.state.partition, step, command.forward_id)
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

    async def append(self, command: Append) -> Appended:
        if self.mounted is not None and self.mounted.covers(command.ref.bucket_id):
            return await self.mounted.append(command)
        key = (command.ref.bucket_id, command.ref.stream_id)
        async with self._locks.hold(key):
            step = await self._decide_append(key, command)
            if not isinstance(step, machine.Write):
                return _reply(step, Appended)
            assert step.state is not None
            topic = self.buckets.topic(step.state.data_bucket)
            batch = self._queue(key, step.state.partition, step, command.forward_id)
        offsets = await asyncio.shield(batch.future)
        settled = machine.settle(step, offsets)
        assert settled is not None
        producer = step.producer[1] if step.producer is not None else None
        kafka = KafkaPosition(topic, step.state.partition, offsets[0]) if offsets else None
        return Appended(settled, appended=True, producer=producer, kafka=kafka)

    async def _decide_append(self, key: StreamKey, command: Append) -> machine.Step:
        """Decide against the pending state, or the committed one when the machine says so."""
        chain = self._chains.get(key)
        if chain is not None:
            view = self._pending_view(key, chain, command)
            step = self.machine.apply(view, command, self.clock())
            if step is not machine.SETTLE:
                return step
            await self._settle(key)
        meta = self._committed(command.ref)
        if meta is not None:
            self._decidable(meta.data_bucket, meta.partition)
        else:
            self._decidable(command.ref.bucket_id, None, command.ref.stream_id)
        step = self.machine.apply(self._view(key, meta), command, self.clock())
        self._held(step)  # an append is an access, answered or refused
        return step

    async def delete(self, ref: StreamRef, forward_id: str | None = None) -> None:
        key = (ref.bucket_id, ref.stream_id)
        chain = [(a.bucket_id, a.stream_id) for a, _ in self._ancestors(self._committed(ref))]
        async with self._holding(*reversed(chain), key):
            await self._settle(key)
            meta = self._committed(ref)
            if meta is not None:
                self._decidable(meta.data_bucket, meta.partition)
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
            await self._carry_out(key, meta.partition, step, forward_id)

    async def collect(self, bucket_id: str, stream_id: str) -> bool:
        """Collect a soft-deleted stream whose forks are all gone (expired; deleted ones
        collect it themselves), with the soft-deleted sources above it that only it kept.
        Only the owner of its write slot does; True when it was collected."""
        key = (bucket_id, stream_id)
        meta = self.catalog.stream(*key)
        if meta is None or not meta.soft_deleted or self._live_forks(*key):
            return False  # the usual case, decided without locks
        if not self.writers.accepting(self._slot(meta)):
            return False
        chain = [(a.bucket_id, a.stream_id) for a, _ in self._ancestors(meta)]
        async with self._holding(*reversed(chain), key):
            await self._settle(key)
            meta = self.catalog.stream(*key)
            if meta is not None:
                self._decidable(meta.data_bucket, meta.partition)
            view = replace(
                self._view(key, meta), forks=self._live_forks(*key), ancestors=self._ancestors(meta)
            )
            step = self.machine.apply(view, Collect(), self.clock())
            if not isinstance(step, machine.Write) or meta is None:
                return False
            await self._carry_out(key, meta.partition, step)
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
        if not self.writers.accepting(self._slot(meta)):
            return False
        async with self._locks.hold(key):
            await self._settle(key)
            meta_now = self.catalog.stream(*key)
            if meta_now is not None:
                self._decidable(meta_now.data_bucket, meta_now.partition)
            view = replace(self._view(key, meta_now), forks=self._live_forks(*key))
            step = self.machine.apply(view, Expire(before_ms), self.clock())
            if not isinstance(step, machine.Write) or meta_now is None:
                return False
            await self._carry_out(key, meta_now.partition, step)
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
            return self.existing(command.ref)
        async with self._locks.hold(key):
            await self._settle(key)
            meta = self._committed(command.ref)
            if meta is not None:
                self._decidable(meta.data_bucket, meta.partition)
            view = self._view(key, meta)
            step = self.machine.apply(view, command, self.clock())
            if isinstance(step, machine.Refused):
                raise step.error
            assert isinstance(step, machine.Write)
            assert step.state is not None
            settled = await self._carry_out(key, step.state.partition, step)
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
        first = await self.time_lookups.first_at_or_after(topic, meta, snapshot)
        return command if first < before else replace(command, before=snapshot)

    async def _change_state(self, ref: StreamRef, command: Fence | Trim) -> StreamMeta:
        """A change of the stream's state alone (no record in its partition), decided on its
        committed state and written in one transaction, as every other change of it."""
        key = (ref.bucket_id, ref.stream_id)
        async with self._locks.hold(key):
            await self._settle(key)
            meta = self._committed(ref)
            if meta is not None:
                self._decidable(meta.data_bucket, meta.partition)
            step = self.machine.apply(self._view(key, meta), command, self.clock())
            if not isinstance(step, machine.Write):
                return _reply(step, Appended).meta
            assert step.state is not None
            settled = await self._carry_out(key, step.state.partition, step)
            assert settled is not None
            return settled

    def snapshot(self, meta: StreamMeta) -> SnapshotPointer | None:
        """The stream's visible snapshot, if one was published."""
        return self.catalog.snapshot(meta)

    async def head(self, ref: StreamRef) -> StreamMeta:
        """Metadata only: a HEAD does not count as an access for the sliding TTL."""
        return self.existing(ref)

    async def read(self, command: Read, reader: Reader | None = None) -> Chunk:
        """A catch-up read; `reader` as `accessed` takes it."""
        if self.mounted is not None and self.mounted.covers(command.ref.bucket_id):
            return await self.mounted.read(command.ref, command.start, command.bounds)
        meta = self.accessed(command.ref, reader)
        topic = self.buckets.topic(meta.data_bucket)
        chunk = await self.reads.read(topic, meta, command.start, command.bounds)
        if chunk.up_to_date and not await self._followed_to_now(meta):
            if not chunk.messages:
                raise LogUnavailable(self.stale_view())  # nothing to serve, no tail to vouch for
            chunk = replace(chunk, up_to_date=False)  # cannot tell: the client reads on
        elif chunk.up_to_date and self.existing(command.ref).next_offset > chunk.next_offset:
            # An append acknowledged elsewhere before this read began was followed just now:
            # read again, to a tail that holds it.
            meta = self.existing(command.ref)
            chunk = await self.reads.read(topic, meta, command.start, command.bounds)
        return self.vouched(chunk)

    async def offset_at(self, ref: StreamRef, at_ms: int) -> int:
        """Where a read by time starts: the stream's first message appended at or after `at_ms`
        (its tail if none was). Not an access: the read that follows is one."""
        if self.mounted is not None and self.mounted.covers(ref.bucket_id):
            return await self.mounted.offset_at(ref, at_ms)
        meta = self.existing(ref)
        return await self.time_lookups.offset_at(self.buckets.topic(meta.data_bucket), meta, at_ms)

    def vouched(self, chunk: Chunk) -> Chunk:
        """The chunk, up to date only if this instance's view is known to be current
        (`adapter/state/view_age.py`): a tail it cannot vouch for may have been passed by an
        acknowledged append it has not followed. Messages are still served (without
        `Stream-Up-To-Date`, the client reads on); nothing at all is 503, retry later."""
        if not chunk.up_to_date or self.view.current():
            return chunk
        if not chunk.messages:
            raise LogUnavailable(self.stale_view())
        return replace(chunk, up_to_date=False)

    async def at_tail(self, ref: StreamRef) -> StreamMeta:
        """Before answering that a stream has nothing past its tail (a long-poll's 204, a
        bootstrap): the stream, as it is once every append acknowledged before now is known
        here; 503 unless this instance's view is known to be current and, when another instance
        takes the stream's writes, it has followed the meta topic to now. The caller answers
        from the stream returned: its tail may have moved. A mounted topic's tails come from
        its own index, not from the meta follower."""
        meta = self.existing(ref)
        if self.mounted is not None and self.mounted.covers(ref.bucket_id):
            return meta
        if not self.view.current() or not await self._followed_to_now(meta):
            raise LogUnavailable(self.stale_view())
        return self.existing(ref)

    async def _followed_to_now(self, meta: StreamMeta) -> bool:
        """Whether every append acknowledged before now is in this instance's view of the
        stream (`MetaCatchUp.unless_local`: a commit acknowledged by the stream's owner a
        moment ago may not be followed yet)."""
        if self.catch_up is None:
            return True
        what = f"a read at the tail of {meta.bucket_id}/{meta.stream_id}"
        return await self.catch_up.unless_local(self._slot(meta), what)

    def stale_view(self) -> str:
        age = self.view.age_s()
        since = "never" if age is None else f"{age:.1f}s ago"
        return (
            "this instance cannot tell whether the stream has newer data: it last knew it had "
            f"followed every acknowledged write {since} (max_view_age_ms); retry"
        )

    # -- waiting for changes ---------------------------------------------------------------

    async def wait_for_data(self, ref: StreamRef, position: int, timeout_s: float) -> StreamMeta:
        """The stream once its tail passes `position`, once it is closed, or when time is up.

        Waiting registers with the hub before yielding, and wake-ups come from this event
        loop, so a commit landing between the check and the wait cannot be missed.
        """
        found: list[StreamMeta] = []

        def moved() -> bool:
            found[:] = [self.accessed(ref)]
            return found[0].next_offset > position or found[0].closed

        await self._wait_until((ref.bucket_id, ref.stream_id), moved, timeout_s)
        return found[0]

    async def applied(self, ref: StreamRef, next_offset: int | None, timeout_s: float) -> bool:
        """Wait until the catalog shows a write made elsewhere: the stream's tail at or past
        `next_offset`, or, when None, the stream gone. False if time ran out."""
        key = (ref.bucket_id, ref.stream_id)

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
            return self._slot(meta)
        return self._creation_slot(StreamRef(bucket_id, stream_id))

    def _slot(self, meta: StreamMeta) -> int:
        """The write slot of the partition holding the stream's records."""
        return self.slots.of_stream(meta.data_bucket, meta.partition)

    def _creation_slot(self, ref: StreamRef) -> int:
        """The slot of a stream about to be created (its partition follows from its id)."""
        partitions = self.buckets.partitions_of(ref.bucket_id)
        return self.slots.of_stream(
            ref.bucket_id, partition_for(stream_key(ref.stream_id), partitions)
        )

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

    def _decidable(self, bucket_id: str, partition: int | None, stream_id: str = "") -> None:
        """Refuse (503) to decide while the slot's writer learns an outcome it answered 504:
        the committed state may lack that write (`LogWriter._learn_on`). Without a partition
        (a stream not known yet) the slot is the one its creation would take."""
        if partition is None:
            slot = self._creation_slot(StreamRef(bucket_id, stream_id))
        else:
            slot = self.slots.of_stream(bucket_id, partition)
        if self.writers.learning(slot):
            raise LogUnavailable(LEARNING_MESSAGE)

    async def _settle(self, key: StreamKey) -> None:
        await self._chains.settle(key, self.writers.limits.timeout_s * 4)

    async def _carry_out(
        self, key: StreamKey, partition: int, write: machine.Write, forward_id: str | None = None
    ) -> StreamMeta | None:
        """Write and wait for the commit (creations and deletions, decided on committed state)."""
        offsets = await asyncio.shield(self._queue(key, partition, write, forward_id).future)
        return machine.settle(write, offsets)

    def _queue(
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
        chain = self._chains.get(key)
        batch = WriteBatch(
            records,
            finalize=partial(self._state_of, key, write),
            after=chain.last if chain is not None else None,
            on_commit=partial(self._committed_write, key, write, trace=trace),
        )
        slot = self.slots.of_stream(meta.data_bucket, partition)
        self._routed_here(slot)  # no await between this check and the queue
        self.writers.enqueue(slot, batch)
        if write.state is not None:
            self._chains.extend(key, write.state, batch, write.producer)
        return batch

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

    def _state_of(
        self, key: StreamKey, write: machine.Write, offsets: list[int]
    ) -> list[StateEntry]:
        """The state records committed with the write (on the writer's thread: pure)."""
        return write_entries(self.topics, key, write, machine.settle(write, offsets))

    def _committed_write(
        self,
        key: StreamKey,
        write: machine.Write,
        offsets: list[int],
        trace: bytes | None = None,
    ) -> None:
        """Apply a committed write to the catalog, the hot tail and the live hub (commit order)."""
        settled = machine.settle(write, offsets, answered_ms=self.clock())
        for producer_id in write.forget:
            self.catalog.apply_producer(producer_key(*key, producer_id), None)
        if settled is None:
            self._forget(key)
        else:
            before = self.catalog.stream(*key)
            since = offsets[0] if write.creates or before is None else before.next_offset
            data = machine.message_offsets(write, offsets)
            self.reads.cache.record(key, since, settled.next_offset, data, write.messages, trace)
            self.catalog.put_stream(settled)
        record = producer_record(key, write)
        if record is not None:
            self.catalog.put_producer(record)
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
        self.reads.cache.forget(key)


def _reply(step: machine.Step, kind: type[R]) -> R:
    """The reply of a step that writes nothing: its result, or its refusal raised."""
    if isinstance(step, machine.Refused):
        raise step.error
    assert isinstance(step, machine.Done)
    assert isinstance(step.reply, kind)
    return step.reply
