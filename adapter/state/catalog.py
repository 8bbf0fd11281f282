"""The catalog of buckets, streams, producer states, slot owners, snapshot pointers and tiered
ranges, mirrored from the compacted meta, producers, owners, snapshots and tier topics (the
per-stream part bounded in memory: `adapter/state/store.py`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import partial
from types import MappingProxyType

from adapter.protocol.model import (
    RELEASED,
    BucketMeta,
    MountMeta,
    ProducerRecord,
    SlotOwner,
    SnapshotPointer,
    StreamMeta,
)
from adapter.state.format_gate import GATE, level_of_record, level_record
from adapter.state.own_records import Echoes
from adapter.state.records import decode, decode_as, encode
from adapter.state.store import (
    DEFAULT_CACHE_ENTRIES,
    MISS,
    Checkpoint,
    Expiring,
    Lru,
    Store,
    StreamKey,
    producers_bytes,
    snapshot_bytes,
    stream_bytes,
)
from adapter.state.unrecorded import Unrecorded, short_of
from adapter.tier.manifest import TierIndex
from topology.internal_records import (
    FORMAT_LEVEL_KEY,
    NEWEST_LEVEL,
    RecordKind,
    bucket_key,
    meta_kind,
    producer_of_key,
    stream_of_key,
    stream_of_snapshot_key,
)

DIRTY_STEP = 256  # rows a checkpoint writes between two turns of the event loop


class Catalog:
    """Buckets and streams by id. Applying the meta topic's records in order rebuilds it.

    A bucket's streams are indexed from the stream records alone, whether or not the bucket's
    record was applied first: compaction keeps only a key's last record, so a bucket record
    rewritten after its streams' (two instances creating one bucket on demand) is replayed
    after them, and membership must not depend on that order.

    Buckets, mounts, slot owners and tiered ranges are few and stay in memory. Streams, their
    producer states and snapshot pointers are as many as the log names: the most recently used
    `cache_entries` of each stay in memory (and, when `cache_bytes` is set, no more than a
    third of it each, by estimate), all of them are in `store` (`adapter/state/store.py`).
    """

    def __init__(
        self,
        store: Store | None = None,
        cache_entries: int = DEFAULT_CACHE_ENTRIES,
        cache_bytes: int = 0,
    ):
        self.store = store if store is not None else Store()
        self.cache_entries = cache_entries
        self.cache_bytes = cache_bytes  # 0: by entries only; else a third for each cache
        self._owners: dict[int, str] = {}  # write slot -> its owner's advertised URL
        self._owner_marks: dict[int, int] = {}  # write slot -> its owner record's offset
        self.tier = TierIndex()  # the cold tier's ranges (the tier topic)
        self.echoes = Echoes()  # this instance's own state records, for the follower
        self._empty()

    def _empty(self) -> None:
        """No bucket, mount or stream (what the meta, producers and snapshots topics say)."""
        cache_entries = self.cache_entries
        self._buckets: dict[str, BucketMeta] = {}
        self._mounts: dict[str, MountMeta] = {}  # registered mounts (configured ones too)
        self._logged_mounts: dict[str, MountMeta] = {}  # the registered ones (in the log)
        self._counts: dict[str, int] = {}  # bucket id -> how many streams it has
        self.unrecorded = Unrecorded()  # streams ahead of their last state record
        # Hot rows; None: known absent (a stream, a snapshot pointer). A stream's producer
        # states are cached whole or not at all.
        # A stream's new state and its producers' are written to the store when evicted
        # (not on every append), unless they change what the store indexes.
        share = self.cache_bytes // 3
        self._streams: Lru[StreamKey, StreamMeta | None] = Lru(
            cache_entries, self.store.put_stream, share, stream_bytes
        )
        self._producers: Lru[StreamKey, dict[str, ProducerRecord]] = Lru(
            cache_entries, self._write_producers, share, producers_bytes
        )
        self._snapshots: Lru[StreamKey, SnapshotPointer | None] = Lru(
            cache_entries, None, share, snapshot_bytes
        )

    def close(self) -> None:
        self.store.close()

    # -- resuming from the store's checkpoint ------------------------------------------------

    def reset(self) -> None:
        """Forget every bucket, mount, stream, producer state and snapshot pointer, in memory
        and in the store: a rebuild from offset 0 follows."""
        self._empty()
        self.store.reset()

    def resume(self) -> None:
        """Take buckets, registered mounts and stream counts from the store's checkpoint (its
        rows are looked up on use)."""
        self._empty()
        for key, value in self.store.others():
            self.apply(key, value, logged=False)
        self._counts = self.store.counts()
        saved = self.store.checkpoint()
        # A row written past the checkpoint may be ahead of its state record unmarked: each
        # counts as ahead until the meta topic's records replayed say otherwise.
        ahead = self.store.ahead()
        self.unrecorded = Unrecorded([*(saved.unrecorded if saved is not None else ()), *ahead])

    def dirty(self) -> list[Callable[[], None]]:
        """Steps that each write up to `DIRTY_STEP` rows changed in memory so far to the store
        (they may run apart, on the event loop, with other work in between: a row changed
        meanwhile is written as it is then, past the positions of the cut, which is harmless)."""
        steps: list[Callable[[], None]] = []
        for lru in (self._streams, self._producers):
            keys = lru.dirty_keys()
            for start in range(0, len(keys), DIRTY_STEP):
                steps.append(partial(lru.write_some, keys[start : start + DIRTY_STEP]))
        return steps

    def save(
        self, positions: dict[str, int], identity: dict[str, str], now_ms: int, dirty: bool = True
    ) -> None:
        """Write every row changed in memory (unless the steps of `dirty()` taken with the
        positions did), buckets, registered mounts and the checkpoint (`positions` of the
        state topics applied so far) to the store in one transaction."""
        if dirty:
            self._streams.write_dirty()
            self._producers.write_dirty()
        # The file is this version's alone: the newest level, whatever is in force in the log.
        others = [(meta.key, encode(meta, NEWEST_LEVEL)) for meta in self._logged_mounts.values()]
        others += [
            (bucket_key(b.bucket_id), encode(b, NEWEST_LEVEL)) for b in self._buckets.values()
        ]
        if GATE.known:  # the records that showed it are behind the checkpoint now
            others.append((FORMAT_LEVEL_KEY, level_record(GATE.known)))
        unrecorded = tuple(self.unrecorded)
        self.store.save(Checkpoint(positions, identity, now_ms, unrecorded), others)

    def _write_producers(self, key: StreamKey, states: dict[str, ProducerRecord]) -> None:
        for producer_id, record in states.items():
            self.store.put_producer(key, producer_id, record)

    def _states(self, key: StreamKey) -> dict[str, ProducerRecord]:
        """The producer states of a stream, cached (looked up in the store on a miss)."""
        states = self._producers.find(key)
        if states is MISS:
            states = self.store.producers(key)
            self._producers.put(key, states)
        return states

    def producers(self, bucket_id: str, stream_id: str) -> dict[str, ProducerRecord]:
        """The idempotent producers of a stream, by producer id (a copy)."""
        return dict(self._states((bucket_id, stream_id)))

    def producer_states(self, bucket_id: str, stream_id: str) -> Mapping[str, ProducerRecord]:
        """The idempotent producers of a stream, by producer id (read-only, not a copy)."""
        return MappingProxyType(self._states((bucket_id, stream_id)))

    def put_producer(self, record: ProducerRecord) -> None:
        key = (record.bucket_id, record.stream_id)
        states = self._producers.find(key)
        if states is MISS:
            self.store.put_producer(key, record.producer_id, record)
        else:
            known = record.producer_id in states
            states[record.producer_id] = record
            self._producers.mark_dirty(key)
            if not known:
                self._producers.resize(key)

    def apply_producer(self, key: str, value: bytes | None) -> None:
        """Apply one record of the producers topic."""
        if value is not None:
            record = decode_as(ProducerRecord, key, value)
            held = self.producer_states(record.bucket_id, record.stream_id)
            if ahead_of(record, held.get(record.producer_id)):
                self.put_producer(record)
            return
        bucket_id, stream_id, producer_id = producer_of_key(key)
        states = self._producers.find((bucket_id, stream_id))
        if states is not MISS and states.pop(producer_id, None) is not None:
            self._producers.resize((bucket_id, stream_id))
        self.store.put_producer((bucket_id, stream_id), producer_id, None)

    def owner(self, slot: int) -> str | None:
        """The advertised URL of the last instance that took write slot `slot`."""
        return self._owners.get(slot)

    def owner_urls(self) -> set[str]:
        """The advertised URLs of the write slots' owners."""
        return set(self._owners.values())

    def owner_mark(self, slot: int) -> int:
        """The offset of the slot's latest owner record applied (-1: none yet). Each owner
        writes one right after fencing its predecessor, so a higher mark means every earlier
        holder of the slot's transactional id is fenced and its transactions are over."""
        return self._owner_marks.get(slot, -1)

    def apply_owner(self, key: str, value: bytes | None, offset: int = -1) -> None:
        """Apply one record of the owners topic (the latest one written is the owner)."""
        if value is not None:
            record = decode_as(SlotOwner, key, value)
            if record.url == RELEASED:
                self._owners.pop(record.slot, None)
            else:
                self._owners[record.slot] = record.url
            self._owner_marks[record.slot] = max(offset, self.owner_mark(record.slot))

    def _pointer(self, key: StreamKey) -> SnapshotPointer | None:
        pointer = self._snapshots.find(key)
        if pointer is MISS:
            pointer = self.store.snapshot(key)
            self._snapshots.put(key, pointer)
        return pointer

    def snapshot(self, meta: StreamMeta) -> SnapshotPointer | None:
        """The stream's visible snapshot: the pointer its `retained_from` names, if any."""
        pointer = self._pointer((meta.bucket_id, meta.stream_id))
        return pointer if pointer is not None and pointer.belongs_to(meta) else None

    def visible_snapshot_keys(self) -> set[str]:
        """The object keys of every visible snapshot: the blobs the collector keeps."""
        kept = set()
        for pointer in self.store.snapshots():
            meta = self._peek((pointer.bucket_id, pointer.stream_id))
            if meta is not None and pointer.belongs_to(meta):
                kept.add(pointer.object_key)
        return kept

    def put_snapshot(self, pointer: SnapshotPointer) -> None:
        key = (pointer.bucket_id, pointer.stream_id)
        self._snapshots.put(key, pointer)
        self.store.put_snapshot(key, pointer)

    def apply_snapshot(self, key: str, value: bytes | None) -> None:
        """Apply one record of the snapshots topic (compacted: the last one of a key wins)."""
        if value is not None:
            self.put_snapshot(decode_as(SnapshotPointer, key, value))
            return
        bucket_id, stream_id = stream_of_snapshot_key(key)
        self._snapshots.put((bucket_id, stream_id), None)
        self.store.put_snapshot((bucket_id, stream_id), None)

    def bucket(self, bucket_id: str) -> BucketMeta | None:
        return self._buckets.get(bucket_id)

    def mount(self, bucket_id: str) -> MountMeta | None:
        return self._mounts.get(bucket_id)

    def mounts(self) -> list[MountMeta]:
        return [self._mounts[bucket_id] for bucket_id in sorted(self._mounts)]

    def put_mount(self, meta: MountMeta, configured: bool = False) -> None:
        """A mount registered (in the log), or configured (`[[mounts]]`: never saved)."""
        self._mounts[meta.bucket_id] = meta
        if not configured:
            self._logged_mounts[meta.bucket_id] = meta

    def drop_mount(self, bucket_id: str) -> None:
        self._mounts.pop(bucket_id, None)
        self._logged_mounts.pop(bucket_id, None)

    def bucket_ids(self) -> list[str]:
        return sorted(self._buckets)

    def stream(self, bucket_id: str, stream_id: str) -> StreamMeta | None:
        key = (bucket_id, stream_id)
        meta = self._streams.find(key)
        if meta is MISS:
            meta = self.store.stream(key)
            self._streams.put(key, meta)
        return meta

    def _peek(self, key: StreamKey) -> StreamMeta | None:
        """The stream, not made recent nor cached (for scans)."""
        meta = self._streams.peek(key)
        return self.store.stream(key) if meta is MISS else meta

    def streams_of(self, bucket_id: str) -> Iterator[tuple[StreamMeta, SnapshotPointer | None]]:
        """Every stream recorded in the bucket (expired and soft-deleted ones included), with
        its visible snapshot. A scan: the index's rows a page at a time (never a list of every
        id: at 100,000 streams that was ≈ 9 MiB, a peak the allocator kept), the cached state
        where there is one (newer, when dirty), and nothing made recent nor cached."""
        for stream_id, row in self.store.stream_rows(bucket_id):
            key = (bucket_id, stream_id)
            meta = self._streams.peek(key)
            meta = row if meta is MISS else meta
            if meta is not None:
                yield meta, self._peek_snapshot(meta)

    def _peek_snapshot(self, meta: StreamMeta) -> SnapshotPointer | None:
        """`snapshot`, not made recent nor cached (for scans)."""
        key = (meta.bucket_id, meta.stream_id)
        pointer = self._snapshots.peek(key)
        pointer = self.store.snapshot(key) if pointer is MISS else pointer
        return pointer if pointer is not None and pointer.belongs_to(meta) else None

    def stream_count(self, bucket_id: str) -> int:
        """Streams recorded in the bucket (expired ones included)."""
        return self._counts.get(bucket_id, 0)

    def stream_ids(self, bucket_id: str, prefix: str, after: str | None) -> Iterator[str]:
        """Ids in byte order that start with `prefix`, strictly after `after`."""
        if after is not None and after >= prefix:
            ids = self.store.stream_ids(bucket_id, after, inclusive=False)
        else:
            ids = self.store.stream_ids(bucket_id, prefix, inclusive=True)
        for stream_id in ids:
            if not stream_id.startswith(prefix):
                return
            yield stream_id

    def put_bucket(self, meta: BucketMeta) -> None:
        self._buckets[meta.bucket_id] = meta

    def drop_bucket(self, bucket_id: str) -> None:
        """Forget the bucket record; its streams go only with their own tombstones."""
        self._buckets.pop(bucket_id, None)

    def soft_deleted(self) -> list[StreamMeta]:
        """Every stream deleted while it had forks, kept for them."""
        metas = (self._peek(key) for key in self.store.soft_deleted())
        return [meta for meta in metas if meta is not None and meta.soft_deleted]

    def expired(self, before_ms: int, page: int = 512) -> Iterator[StreamMeta]:
        """The streams (not soft-deleted) whose deadline passed before `before_ms`, read from
        the index a page at a time. A candidate of the index that is not (its sliding TTL was
        renewed since its row was written) has its row brought up to date."""
        after: Expiring | None = None
        while True:
            rows = self.store.expiring(before_ms, page, after)
            yield from self._expired_of(rows, before_ms)
            if len(rows) < page:
                return
            after = rows[-1]

    def _expired_of(self, rows: list[Expiring], before_ms: int) -> list[StreamMeta]:
        found = []
        for _deadline, bucket_id, stream_id in rows:
            key = (bucket_id, stream_id)
            meta = self._peek(key)
            if meta is None:
                continue
            deadline = meta.deadline_ms()
            if deadline is not None and deadline < before_ms and not meta.soft_deleted:
                found.append(meta)
            else:
                self.store.put_stream(key, meta)
        return found

    def forks_of(self, bucket_id: str, stream_id: str) -> list[StreamMeta]:
        """The streams forked from this one, of any bucket (expired ones included)."""
        metas = (self._peek(key) for key in self.store.fork_keys((bucket_id, stream_id)))
        return [meta for meta in metas if meta is not None]

    def housed_in(self, bucket_id: str) -> list[StreamMeta]:
        """The streams of other buckets whose records the bucket's topic holds (forks across
        buckets, soft-deleted and expired ones included)."""
        metas = (self._peek(key) for key in self.store.housed_keys(bucket_id))
        return [meta for meta in metas if meta is not None]

    def streams_in_topic(
        self, bucket_id: str
    ) -> Iterator[tuple[StreamMeta, SnapshotPointer | None]]:
        """Every stream whose records the bucket's topic holds, with its visible snapshot: the
        bucket's own streams but its forks of other buckets' streams (their offsets are their
        source's topic's), and the forks of other buckets it houses. What walks a topic's
        offsets (retention floors, freeing Kafka) must take these, not `streams_of`."""
        for meta, pointer in self.streams_of(bucket_id):
            if meta.data_bucket == bucket_id:
                yield meta, pointer
        for meta in self.housed_in(bucket_id):
            yield meta, self._peek_snapshot(meta)

    def put_stream(self, meta: StreamMeta) -> None:
        key = (meta.bucket_id, meta.stream_id)
        before = self.stream(*key)
        if before is None:
            self._counts[meta.bucket_id] = self._counts.get(meta.bucket_id, 0) + 1
        if (
            before is None
            or before.forked_from != meta.forked_from
            or before.source_bucket != meta.source_bucket
            or before.home != meta.home
            or before.soft_deleted != meta.soft_deleted
        ):  # what the store indexes changed: it must know now
            self._streams.put(key, meta)
            self.store.put_stream(key, meta)
        else:
            self._streams.put(key, meta, dirty=True)

    def drop_stream(self, bucket_id: str, stream_id: str, producers: bool = True) -> None:
        """Forget a stream, and its producer states unless the log says so separately."""
        key = (bucket_id, stream_id)
        if producers:
            self._producers.put(key, {})
            self.store.drop_producers(key)
        self.unrecorded.forget(key)
        if self.stream(*key) is None:
            return
        self._streams.put(key, None)
        self.store.put_stream(key, None)
        count = self._counts[bucket_id] - 1
        if count:
            self._counts[bucket_id] = count
        else:
            del self._counts[bucket_id]

    def apply(self, key: str, value: bytes | None, logged: bool = True) -> None:
        """Apply one record of the meta topic, in log order: a value upserts, a tombstone
        removes. A stream's producer states are not touched: the producers topic has its own
        tombstones, written in the same transaction, and the two topics are replayed in no
        particular order relative to each other. A record `logged` (read from the topic, not
        from the catalog file) shows the format level gate what is in force."""
        if key == FORMAT_LEVEL_KEY:
            if value is not None:
                GATE.saw_level(level_of_record(value))
            return
        if value is None:
            self._forget(key)
            return
        if logged:
            GATE.saw(meta_kind(key), value)
        record = decode(key, value)
        if isinstance(record, BucketMeta):
            self.put_bucket(record)
        elif isinstance(record, MountMeta):
            self.put_mount(record)
        else:
            self.put_stream(newer(self.stream(record.bucket_id, record.stream_id), record))
            self._recorded(record)

    def _recorded(self, record: StreamMeta) -> None:
        self.unrecorded.recorded(record, self.stream(record.bucket_id, record.stream_id))

    def echoed(self, key: str, value: bytes | None) -> None:
        """The echo of a meta record this instance committed (its commit applied it): a stream
        ahead of its records is recorded by it as by anyone's (decoded only then)."""
        if value is None or key == FORMAT_LEVEL_KEY or meta_kind(key) is not RecordKind.STREAM_META:
            return
        if stream_of_key(key) in self.unrecorded:
            self._recorded(decode_as(StreamMeta, key, value))

    def _forget(self, key: str) -> None:
        bucket_id, stream_id = stream_of_key(key)
        if meta_kind(key) is RecordKind.MOUNT_META:
            self.drop_mount(bucket_id)
            return
        if stream_id:
            self.drop_stream(bucket_id, stream_id, producers=False)
        else:
            self.drop_bucket(bucket_id)


def newer(current: StreamMeta | None, incoming: StreamMeta) -> StreamMeta:
    """The later of two states of a stream, keeping the later sliding-TTL access. A record of
    the stream's incarnation short of the tail known here (learned from the stream's own
    records, `adapter/state/data_tails.py`) still brings what else it changed (a trim, a
    fence, a TTL): only the tail stays."""
    if current is None or current.created_at_ms != incoming.created_at_ms:
        return incoming
    if short_of(incoming, current):
        return with_tail_of(incoming, current)
    return incoming.evolve(last_access_ms=max(current.last_access_ms, incoming.last_access_ms))


def ahead_of(record: ProducerRecord, held: ProducerRecord | None) -> bool:
    """Whether `record` is a later state of its producer than `held`. A producer's (epoch,
    last_seq) only grows: a record behind the state known here (a checkpoint read after the
    stream's own records were, `adapter/state/data_tails.py`) brings nothing."""
    return held is None or (record.epoch, record.last_seq) >= (held.epoch, held.last_seq)


def with_tail_of(meta: StreamMeta, further: StreamMeta) -> StreamMeta:
    """`meta` at the tail of `further`, a state of the same incarnation further on: what its
    appends changed (tail, count, Stream-Seq, write time, closure) and the later access."""
    return meta.evolve(
        next_offset=further.next_offset,
        message_count=further.message_count,
        last_seq=further.last_seq,
        last_write_at_ms=further.last_write_at_ms,
        closed=further.closed or meta.closed,
        last_access_ms=max(meta.last_access_ms, further.last_access_ms),
    )
