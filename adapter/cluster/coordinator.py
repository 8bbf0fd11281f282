"""Where a request is served among the instances: what the HTTP edge asks once before a write
and once before a read.

Before a write: the slot it changes and that slot's route (`routing.decide`): here, forwarded to
its owner, or refused while the slot moves. A write's slot is found in the catalog (a fork's is
its source's, whatever its own id hashes to), so an instance that does not take every slot's
writes and does not know the stream a write names (or the source a fork names) first follows
the meta topic to what is written in it now: another instance or a sibling may have just made
it (a fork made through one instance and appended to through another at once would otherwise
be routed by its own id to a slot that is not its own: 404 or 503). Concurrent waits share one
query of the topic's end (`MetaFollower.seen_written`): a few round trips when caught up.

An owner deciding a creation may not be the one that made a stream of that name (a new stream
is placed by its id, a fork in its source's partition): one made through another owner a moment
ago must be seen before this one is created over it (409, or the same stream again), so an owner
that does not know the name catches up first too. Only two creations of one name racing through
two owners can still both succeed (the later record wins); see docs/explanation/limits.md.

Before a read, between sibling workers only (`serve --workers`): a read of a stream whose slot
a sibling owns is served here once this worker's catalog shows the stream as the owner does now,
so a client whose connections land on different workers reads its own writes as from one
process. The owner is asked as the read would ask it (`Ask`): `GET ?offset=now` (an access: it
renews a sliding TTL there too, where expiry is decided) or `HEAD` (not one). Its answer carries
its last access to the stream, adopted here when later than ours. A stream this worker does not
know is asked of every sibling (its slot is not known: a fork's is its source's). Any failure to
ask leaves the read to this worker's catalog as it is, as between instances.

After a write forwarded to its owner succeeds, its answer waits (bounded) until this instance's
catalog shows the change (`after_forward`), so a client that writes through this instance and
reads through it next sees its own write.

HTTP stays out of this layer: the edge parses a request into a `Write` or a stream's reference,
and hands a read the `Ask` that asks an owner as that reader did.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Protocol

from adapter.cluster.catch_up import MetaCatchUp
from adapter.cluster.routing import Forward, Local, Route, Router
from adapter.protocol.commands import StreamRef
from adapter.state.catalog import Catalog
from topology.slots import SlotMap

log = logging.getLogger(__name__)

SIBLING_READ_WAIT_S = 2.0  # how long a sibling's read waits for this catalog to show its answer
SHOWN_WAIT_S = 2.0  # how long a forwarded write's answer waits for this catalog to show it
MOVE_POLL_S = 0.1  # how often a forward that has no answer yet looks for its slot's next owner


@dataclass(frozen=True)
class Write:
    """A write request as the cluster sees it; the handler checks everything else."""

    bucket_id: str
    stream_id: str | None = None  # None: the bucket itself
    fork_source: tuple[str, str] | None = None  # (bucket, stream) a fork's PUT names as source
    creates: bool = False  # a PUT of the stream itself: a creation or a fork
    snapshot: bool = False  # it names a snapshot's offset (a publish)
    forwarded: bool = False  # another instance forwarded it here: never forwarded again


@dataclass(frozen=True)
class Described:
    """A stream as its owner answered for it: tail None and not gone means it has none."""

    tail: int | None
    closed: bool = False
    gone: bool = False
    last_access_ms: int | None = None  # the owner's last access (reads it served, writes)


# Asks the instance at a URL for the stream as the reader asked here; None: no usable answer.
Ask = Callable[[str], Awaitable[Described | None]]


@dataclass(frozen=True)
class TailMoved:
    """An owner wrote to a stream: its tail is now at least `tail` (None: it was deleted)."""

    ref: StreamRef
    tail: int | None


@dataclass(frozen=True)
class SnapshotPublished:
    """An owner published a snapshot of a stream at `offset` (a publish moves no tail)."""

    ref: StreamRef
    offset: int


@dataclass(frozen=True)
class Trimmed:
    """An owner trimmed a stream: its earliest offset is now at least `earliest`."""

    ref: StreamRef
    earliest: int


@dataclass(frozen=True)
class BucketChanged:
    """An owner made (`exists`) or deleted a bucket or a mount."""

    bucket_id: str
    exists: bool
    etag: str | None = None  # its configuration as the owner's answer tagged it


Change = TailMoved | SnapshotPublished | Trimmed | BucketChanged


class LocalStreams(Protocol):
    """What the coordinator asks of this instance's streams (`StreamService`)."""

    @property
    def clock(self) -> Callable[[], int]: ...

    def slot_of(
        self, bucket_id: str, stream_id: str, forked_from: tuple[str, str] | None = None
    ) -> int:
        """The write slot of a stream, existing or about to be created."""
        ...

    async def reflects(
        self,
        ref: StreamRef,
        next_offset: int | None,
        closed: bool,
        timeout_s: float,
        gone: bool = False,
    ) -> bool:
        """Wait until the catalog shows the stream as its owner described it."""
        ...

    def accessed_elsewhere(self, ref: StreamRef, at_ms: int) -> None:
        """An access its owner reports, applied here too."""
        ...

    async def applied(self, ref: StreamRef, next_offset: int | None, timeout_s: float) -> bool:
        """Wait until the catalog shows the stream's tail at `next_offset` (None: gone)."""
        ...

    async def snapshot_applied(self, ref: StreamRef, offset: int, timeout_s: float) -> bool:
        """Wait until the catalog shows a snapshot of the stream at `offset` or later."""
        ...

    async def trim_applied(self, ref: StreamRef, earliest: int, timeout_s: float) -> bool:
        """Wait until the catalog shows the stream trimmed to `earliest` (or gone)."""
        ...

    async def bucket_applied(
        self, bucket_id: str, exists: bool, timeout_s: float, etag: str | None = None
    ) -> bool:
        """Wait until the catalog shows the bucket (or mount) made or gone, and with `etag`
        when given (its configuration changed)."""
        ...


class Coordinator:
    """The route of each write and the sync of each sibling's read (see the module's docstring)."""

    def __init__(
        self,
        router: Router,
        catalog: Catalog,
        streams: LocalStreams,
        slots: SlotMap,
        catch_up: MetaCatchUp,
        siblings: Collection[str] = (),
    ) -> None:
        self.router = router
        self.catalog = catalog
        self.streams = streams
        self.slots = slots
        self.catch_up = catch_up  # follows the meta topic to now unless every slot is ours
        self.siblings = frozenset(siblings)  # sibling workers' advertised URLs

    async def before_write(self, write: Write) -> Route | None:
        """Where `write` is carried out; None: here, whatever owns what (a mount's streams
        are read-only: the handler refuses the write)."""
        caught_up = False
        if not write.forwarded:
            caught_up = await self._known(*_named(write))
        slot = self._slot(write)
        if slot is None:
            return None
        route = self.router.route(slot)
        if isinstance(route, Local) and write.creates and not caught_up:
            await self._known(write.bucket_id, write.stream_id)
        return route

    async def before_read(self, ref: StreamRef, renews: bool, ask: Ask) -> None:
        """Between sibling workers: wait until this catalog shows `ref` as its owner does now
        (bounded), adopting the owner's last access; `renews`: the read is an access (a GET)."""
        owners = self._siblings_to_ask(ref)
        if not owners:
            return
        answers = await asyncio.gather(*(ask(url) for url in owners))
        found = [a for a in answers if a is not None and (a.tail is not None or a.gone)]
        described = found[0] if found else answers[0] if len(owners) == 1 else None
        if described is not None:
            await self._adopt(ref, described, renews)

    async def after_forward(self, change: Change) -> None:
        """Hold a forwarded write's answer until this catalog shows its `change` (bounded)."""
        streams, wait_s = self.streams, SHOWN_WAIT_S
        match change:
            case TailMoved(ref, tail):
                shown, what = await streams.applied(ref, tail, wait_s), f"write to {ref}"
            case SnapshotPublished(ref, offset):
                shown = await streams.snapshot_applied(ref, offset, wait_s)
                what = f"publish to {ref}"
            case Trimmed(ref, earliest):
                shown, what = await streams.trim_applied(ref, earliest, wait_s), f"trim of {ref}"
            case BucketChanged(bucket_id, exists, etag):
                shown = await streams.bucket_applied(bucket_id, exists, wait_s, etag)
                what = f"change of bucket {bucket_id}"
        if not shown:
            log.info("forwarded %s not seen locally within %.1fs", what, wait_s)

    async def moved(self, slot: int, mark: int, within_s: float) -> bool:
        """Whether an owner record of `slot` newer than `mark` (`Catalog.owner_mark`) is applied
        within `within_s`: then every earlier owner is fenced and its transactions are over."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within_s
        while self.catalog.owner_mark(slot) <= mark:
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(MOVE_POLL_S)
        return True

    def last_access_ms(self, ref: StreamRef) -> int | None:
        """What this worker tells a sibling that asked for `ref`: its last access to a stream
        with a sliding TTL (which renewed it for every worker); None for any other stream."""
        meta = self.catalog.stream(ref.bucket_id, ref.stream_id)
        if meta is None or meta.ttl_seconds is None:
            return None
        return meta.last_access_ms

    async def _known(self, bucket_id: str, stream_id: str | None) -> bool:
        """Follow the meta topic to what is written in it now, unless this instance takes every
        slot's writes or its catalog knows the stream (or its bucket is a mount, indexed from
        its topic); whether it asked to follow (a failure is logged: the write is routed on
        what is known)."""
        if stream_id is None or self.catalog.mount(bucket_id) is not None:
            return False
        if self.catch_up.local(None) or self.catalog.stream(bucket_id, stream_id) is not None:
            return False
        await self.catch_up.unless_local(None, f"routing a write naming {bucket_id}/{stream_id}")
        return True

    def _slot(self, write: Write) -> int | None:
        """The slot `write` changes; None for a mount's streams."""
        if write.stream_id is None:
            return self.slots.of_bucket(write.bucket_id)
        if self.catalog.mount(write.bucket_id) is not None:
            return None
        return self.streams.slot_of(write.bucket_id, write.stream_id, write.fork_source)

    def _siblings_to_ask(self, ref: StreamRef) -> list[str]:
        """The sibling workers that may own `ref`: its owner, or every sibling when this
        worker does not know the stream; none when another instance (or this one) owns it."""
        if not self.siblings or self.catalog.mount(ref.bucket_id) is not None:
            return []  # a mount's streams are indexed by every worker from the topic itself
        if self.catalog.stream(ref.bucket_id, ref.stream_id) is None:
            return list(self.siblings)
        route = self.router.route(self.streams.slot_of(ref.bucket_id, ref.stream_id))
        if not isinstance(route, Forward) or route.url not in self.siblings:
            return []
        return [route.url]

    async def _adopt(self, ref: StreamRef, described: Described, renews: bool) -> None:
        tail, closed, gone = described.tail, described.closed, described.gone
        if not await self.streams.reflects(ref, tail, closed, SIBLING_READ_WAIT_S, gone):
            log.info("a sibling's %s not seen locally within %.1fs", ref, SIBLING_READ_WAIT_S)
        at_ms = described.last_access_ms
        if renews and tail is not None:
            # The owner counted this read as an access (its renewals by reads reach this
            # worker only with the stream's next write): count it here too, before the
            # handler judges whether a sliding TTL has run out.
            at_ms = max(at_ms or 0, self.streams.clock())
        if at_ms is not None:
            self.streams.accessed_elsewhere(ref, at_ms)


def _named(write: Write) -> tuple[str, str | None]:
    """The existing stream a write needs known to be routed: a fork's source; the stream an
    append, a fence, a trim or a deletion changes. A creation's own name is checked by its
    owner alone, and a snapshot's slot follows from its stream as known here."""
    if write.creates or write.snapshot:
        return write.fork_source or (write.bucket_id, None)
    return write.bucket_id, write.stream_id
