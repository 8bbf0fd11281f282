"""Our own streams as a `StreamSource`: looked up in the catalog, read from the hot tail, Kafka
and the cold tier (`reads.py`), read by time through `time_lookups.py`, and appended to
through the stream driver (`streams.py`), which decides every change of them.

A tail is said to be up to date only as far as this instance knows it is. When it takes the
stream's writes itself: its view of the state topics current (`adapter/state/view_age.py`).
When another instance does: the stream carried forward over its own partition's records up to
the partition's end asked after the read began (`adapter/state/data_tails.py`); only when those
records show the stream deleted or made anew (metadata, not a tail) is the meta topic followed
to now (`MetaCatchUp.unless_local`) and the view's currency asked instead.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace

from adapter.cluster.access_relay import AccessRelay, Reader
from adapter.cluster.catch_up import MetaCatchUp
from adapter.log.errors import LogUnavailable
from adapter.protocol import stream_machine as machine
from adapter.protocol.commands import Access, Append, Appended, Chunk, Read, StreamRef
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.model import StreamMeta
from adapter.service.interfaces import StreamBuckets
from adapter.service.reads import ReadPath
from adapter.service.time_lookups import TimeLookups
from adapter.state.catalog import Catalog
from adapter.state.data_tails import DataTails
from adapter.state.view_age import ViewAge

log = logging.getLogger(__name__)

Clock = Callable[[], int]
Appender = Callable[[Append], Awaitable[Appended]]


class NativeStreams:
    def __init__(
        self,
        catalog: Catalog,
        buckets: StreamBuckets,
        reads: ReadPath,
        view: ViewAge,
        clock: Clock,
        rules: machine.Machine,
        append: Appender,
        relay: AccessRelay | None = None,
        catch_up: MetaCatchUp | None = None,
        tails: DataTails | None = None,
    ) -> None:
        self.catalog = catalog
        self.buckets = buckets
        self.reads = reads
        self.time_lookups = TimeLookups(reads)
        self.view = view  # how recently every acknowledged change was known to be followed
        self.clock = clock
        self.machine = rules  # the driver's: it alone decides whether and how a TTL slides
        self._append = append  # the stream driver's: decided by the machine, under its lock
        self.relay = relay  # tells other instances' streams' owners of reads served here
        # Follows the meta topic to now unless a stream's slot is written here; None: a
        # process on its own log, nothing to follow.
        self.catch_up = catch_up
        self.tails = tails  # brings streams written elsewhere to their tail from their records

    # -- lookups ---------------------------------------------------------------------------

    def existing(self, ref: StreamRef) -> StreamMeta:
        """The stream, unless it does not exist or has expired (both 404)."""
        meta = self.committed(ref)
        if meta is not None and meta.soft_deleted:
            raise machine.gone(ref.stream_id)
        if meta is None or meta.expired(self.clock()):
            raise machine.not_found(ref.stream_id)
        return meta

    def committed(self, ref: StreamRef) -> StreamMeta | None:
        """The stream as committed (None if absent); its bucket must exist unless made on demand."""
        if self.catalog.bucket(ref.bucket_id) is None and not ref.create_bucket:
            raise ProtocolError(ErrorCode.BUCKET_NOT_FOUND, f"bucket {ref.bucket_id!r} not found")
        return self.catalog.stream(ref.bucket_id, ref.stream_id)

    def check_change(self, ref: StreamRef) -> None:
        """Every change of our streams is the machine's to decide: nothing refused here."""

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
        return self.renewed(self.existing(ref), self.clock())

    def accessed_elsewhere(self, ref: StreamRef, at_ms: int) -> None:
        """An access at `at_ms` its owner reports (a sibling worker's answer to a read asked of
        it), applied here too, even to a stream that looks expired here."""
        meta = self.catalog.stream(ref.bucket_id, ref.stream_id)
        if meta is not None:
            self.renewed(meta, at_ms)

    def renewed(self, meta: StreamMeta, at_ms: int) -> StreamMeta:
        """The stream after an access at `at_ms`, as the machine decides it."""
        step = self.machine.apply(machine.View(meta), Access(at_ms), at_ms)
        return self.held(step) or meta

    def held(self, step: machine.Step) -> StreamMeta | None:
        """Carry out the renewal a step says, if any: held in the catalog, written with the
        stream's next write."""
        renewed = machine.renewal(step)
        if renewed is not None:
            self.catalog.put_stream(renewed)
        return renewed

    # -- appends and reads -----------------------------------------------------------------

    async def append(self, command: Append) -> Appended:
        return await self._append(command)

    async def read(self, command: Read, reader: Reader | None = None) -> Chunk:
        """A catch-up read; `reader` as `accessed` takes it."""
        meta = self.accessed(command.ref, reader)
        topic = self.buckets.topic(meta.data_bucket)
        chunk = await self.reads.read(topic, meta, command.start, command.bounds)
        if not chunk.up_to_date:
            return chunk
        why = await self._why_unknown(meta)
        if why is not None:
            if not chunk.messages:
                raise LogUnavailable(why)  # nothing to serve, no tail to vouch for
            return replace(chunk, up_to_date=False)  # cannot tell: the client reads on
        if self.existing(command.ref).next_offset > chunk.next_offset:
            # An append acknowledged elsewhere before this read began was learned just now:
            # read again, to a tail that holds it.
            meta = self.existing(command.ref)
            chunk = await self.reads.read(topic, meta, command.start, command.bounds)
        return chunk

    async def offset_at(self, ref: StreamRef, at_ms: int) -> int:
        """Its first message at or after `at_ms`, or its tail as of now when none is."""
        meta = await self.latest(ref)
        return await self.time_lookups.offset_at(self.buckets.topic(meta.data_bucket), meta, at_ms)

    async def at_tail(self, ref: StreamRef) -> StreamMeta:
        """503 unless every append acknowledged before now is known here (`_why_unknown`). The
        caller answers from the stream returned: its tail may have moved."""
        why = await self._why_unknown(self.existing(ref))
        if why is not None:
            raise LogUnavailable(why)
        return self.existing(ref)

    async def latest(self, ref: StreamRef) -> StreamMeta:
        """The stream as `existing`, at the tail of every append acknowledged before now when
        that can be told (else as known here: a HEAD says no more than the tail it knows)."""
        await self._why_unknown(self.existing(ref))
        return self.existing(ref)

    def written_elsewhere(self, meta: StreamMeta) -> tuple[str, int] | None:
        """(topic, partition) of the stream when another instance takes its writes and its
        tail is learned from its records here; None when written here."""
        if self.catch_up is None or self.tails is None or self.catch_up.local(self._slot(meta)):
            return None
        return self.buckets.topic(meta.data_bucket), meta.partition

    async def learned(self, ref: StreamRef, tail: int, within_s: float) -> None:
        """A stream written elsewhere, brought here to `tail` (its owner's word: every record
        below it is acknowledged) from its records, within `within_s`; nothing when written
        here, absent or there already (what cannot be learned in time is left to the meta
        follower)."""
        meta = self.catalog.stream(ref.bucket_id, ref.stream_id)
        place = None if meta is None else self.written_elsewhere(meta)
        if meta is None or place is None or self.tails is None or meta.next_offset >= tail:
            return
        try:
            async with asyncio.timeout(within_s):
                await self.tails.caught_up(place[0], meta, tail)
        except (LogUnavailable, TimeoutError) as error:
            what = f"{ref.bucket_id}/{ref.stream_id}"
            log.info("%s not learned to %d from its records: %s", what, tail, error)

    async def listed(self, metas: list[StreamMeta]) -> list[StreamMeta]:
        """A page of a listing, each stream written elsewhere carried forward over its
        partition's records as of now (one scan per partition; where records after a tail
        known here were freed, from the tails the meta topic shows once followed to now, as a
        read does: `_why_unknown`, and from no lower than the partition's log start); a
        partition that cannot be read now leaves its streams as known here (logged)."""
        tails = self.tails
        if tails is None:
            return metas  # every slot written here: the catalog is the tail
        places: dict[tuple[str, int], list[StreamMeta]] = {}
        for meta in metas:
            place = self.written_elsewhere(meta)
            if place is not None:
                places.setdefault(place, []).append(meta)
        for (topic, partition), together in places.items():
            try:
                if not await tails.caught_up_together(topic, partition, together):
                    await self._followed_to_now(together[0])
                    followed = [self.catalog.stream(m.bucket_id, m.stream_id) for m in together]
                    known = [meta for meta in followed if meta is not None]
                    await tails.caught_up_together(topic, partition, known, followed=True)
            except LogUnavailable as error:
                log.info("a listing: %s[%d] not read to its end: %s", topic, partition, error)
        return [self.catalog.stream(m.bucket_id, m.stream_id) or m for m in metas]

    async def _why_unknown(self, meta: StreamMeta) -> str | None:
        """None when every append of the stream acknowledged before now is in this instance's
        view of it, else why that cannot be told. Known: when its slot is written here (or
        everywhere), with the view current; else once the stream is carried forward over its
        partition's records to the end asked now; else (its records show it deleted or made
        anew, or lie below the partition's log start) with the view current and the meta topic
        followed to now, and then carried forward from there over the records Kafka holds
        (from its log start when the tail lies below it): the owner checkpoints a stream
        before Kafka frees any of its records, so its metadata then shows a tail at or past
        them."""
        try:
            if await self._carried(meta):
                return None
            if not (self.view.current() and await self._followed_to_now(meta)):
                return self.stale_view()
            followed = self.catalog.stream(meta.bucket_id, meta.stream_id)
            if followed is not None:  # from no lower than the log start; False: it says all
                await self._carried(followed, followed=True)
        except LogUnavailable as error:
            return str(error)
        return None

    async def _carried(self, meta: StreamMeta, followed: bool = False) -> bool:
        """Whether the stream, written elsewhere, was carried forward to its partition's end
        as of now (`DataTails.caught_up`, `followed` as it takes it); False when written here,
        or when its records say nothing of its tail (LogUnavailable: the end cannot be
        reached)."""
        place = self.written_elsewhere(meta)
        if place is None or self.tails is None:
            return False
        try:
            return await self.tails.caught_up(place[0], meta, followed=followed)
        except LogUnavailable as error:
            what = f"a read at the tail of {meta.bucket_id}/{meta.stream_id}"
            log.info("%s: cannot reach its partition's end: %s", what, error)
            raise LogUnavailable(
                f"cannot tell whether the stream has newer data: {error}"
            ) from error

    async def _followed_to_now(self, meta: StreamMeta) -> bool:
        """Whether every change acknowledged before now is in this instance's view of the
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

    def _slot(self, meta: StreamMeta) -> int:
        """The write slot of the partition holding the stream's records."""
        return self.buckets.slots.of_stream(meta.data_bucket, meta.partition)
