"""The in-memory catalog of buckets, streams, producer states, slot owners, snapshot pointers
and tiered ranges, mirrored from the compacted meta, producers, owners, snapshots and tier
topics."""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping
from types import MappingProxyType

from adapter.state.echoes import Echoes
from adapter.state.records import (
    BucketMeta,
    MountMeta,
    ProducerRecord,
    SlotOwner,
    SnapshotPointer,
    StreamMeta,
    decode,
    decode_as,
    stream_of_key,
)
from adapter.tier.manifest import TierIndex
from topology.listing import ids_after


class Catalog:
    """Buckets and streams by id. Applying the meta topic's records in order rebuilds it.

    A bucket's streams are indexed from the stream records alone, whether or not the bucket's
    record was applied first: compaction keeps only a key's last record, so a bucket record
    rewritten after its streams' (two instances creating one bucket on demand) is replayed
    after them, and membership must not depend on that order.
    """

    def __init__(self) -> None:
        self._buckets: dict[str, BucketMeta] = {}
        self._mounts: dict[str, MountMeta] = {}  # registered mounts (configured ones too)
        self._members: dict[str, list[str]] = {}  # bucket id -> its stream ids, kept sorted
        self._streams: dict[tuple[str, str], StreamMeta] = {}
        self._forks: dict[tuple[str, str], set[str]] = {}  # (bucket, source) -> its forks' ids
        self._producers: dict[tuple[str, str], dict[str, ProducerRecord]] = {}
        self._owners: dict[int, str] = {}  # write slot -> its owner's advertised URL
        self._owner_marks: dict[int, int] = {}  # write slot -> its owner record's offset
        self._snapshots: dict[tuple[str, str], SnapshotPointer] = {}
        self.tier = TierIndex()  # the cold tier's ranges (the tier topic)
        self.echoes = Echoes()  # this instance's own state records, for the follower

    def producers(self, bucket_id: str, stream_id: str) -> dict[str, ProducerRecord]:
        """The idempotent producers of a stream, by producer id (a copy)."""
        return dict(self._producers.get((bucket_id, stream_id), {}))

    def producer_states(self, bucket_id: str, stream_id: str) -> Mapping[str, ProducerRecord]:
        """The idempotent producers of a stream, by producer id (read-only, not a copy)."""
        return MappingProxyType(self._producers.get((bucket_id, stream_id), {}))

    def put_producer(self, record: ProducerRecord) -> None:
        self._producers.setdefault((record.bucket_id, record.stream_id), {})[record.producer_id] = (
            record
        )

    def apply_producer(self, key: str, value: bytes | None) -> None:
        """Apply one record of the producers topic."""
        if value is not None:
            self.put_producer(decode_as(ProducerRecord, key, value))
            return
        stream, _, producer_id = key.partition("\x00")
        bucket_id, _, stream_id = stream.partition("/")
        states = self._producers.get((bucket_id, stream_id), {})
        states.pop(producer_id, None)
        if not states:
            self._producers.pop((bucket_id, stream_id), None)

    def owner(self, slot: int) -> str | None:
        """The advertised URL of the last instance that took write slot `slot`."""
        return self._owners.get(slot)

    def owner_mark(self, slot: int) -> int:
        """The offset of the slot's latest owner record applied (-1: none yet). Each owner
        writes one right after fencing its predecessor, so a higher mark means every earlier
        holder of the slot's transactional id is fenced and its transactions are over."""
        return self._owner_marks.get(slot, -1)

    def apply_owner(self, key: str, value: bytes | None, offset: int = -1) -> None:
        """Apply one record of the owners topic (the latest one written is the owner)."""
        if value is not None:
            record = decode_as(SlotOwner, key, value)
            self._owners[record.slot] = record.url
            self._owner_marks[record.slot] = max(offset, self.owner_mark(record.slot))

    def snapshot(self, meta: StreamMeta) -> SnapshotPointer | None:
        """The stream's visible snapshot: the pointer its `retained_from` names, if any."""
        pointer = self._snapshots.get((meta.bucket_id, meta.stream_id))
        return pointer if pointer is not None and pointer.belongs_to(meta) else None

    def visible_snapshot_keys(self) -> set[str]:
        """The object keys of every visible snapshot: the blobs the collector keeps."""
        kept = set()
        for (bucket_id, stream_id), pointer in self._snapshots.items():
            meta = self._streams.get((bucket_id, stream_id))
            if meta is not None and pointer.belongs_to(meta):
                kept.add(pointer.object_key)
        return kept

    def put_snapshot(self, pointer: SnapshotPointer) -> None:
        self._snapshots[(pointer.bucket_id, pointer.stream_id)] = pointer

    def apply_snapshot(self, key: str, value: bytes | None) -> None:
        """Apply one record of the snapshots topic (compacted: the last one of a key wins)."""
        if value is not None:
            self.put_snapshot(decode_as(SnapshotPointer, key, value))
            return
        bucket_id, _, stream_id = key.removeprefix("snapshot:").partition("/")
        self._snapshots.pop((bucket_id, stream_id), None)

    def bucket(self, bucket_id: str) -> BucketMeta | None:
        return self._buckets.get(bucket_id)

    def mount(self, bucket_id: str) -> MountMeta | None:
        return self._mounts.get(bucket_id)

    def mounts(self) -> list[MountMeta]:
        return [self._mounts[bucket_id] for bucket_id in sorted(self._mounts)]

    def put_mount(self, meta: MountMeta) -> None:
        self._mounts[meta.bucket_id] = meta

    def drop_mount(self, bucket_id: str) -> None:
        self._mounts.pop(bucket_id, None)

    def bucket_ids(self) -> list[str]:
        return sorted(self._buckets)

    def stream(self, bucket_id: str, stream_id: str) -> StreamMeta | None:
        return self._streams.get((bucket_id, stream_id))

    def streams_of(self, bucket_id: str) -> Iterator[tuple[StreamMeta, SnapshotPointer | None]]:
        """Every stream recorded in the bucket (expired and soft-deleted ones included), with
        its visible snapshot."""
        for stream_id in self._members.get(bucket_id, ()):
            meta = self._streams[(bucket_id, stream_id)]
            yield meta, self.snapshot(meta)

    def stream_count(self, bucket_id: str) -> int:
        """Streams recorded in the bucket (expired ones included)."""
        return len(self._members.get(bucket_id, ()))

    def stream_ids(self, bucket_id: str, prefix: str, after: str | None) -> Iterator[str]:
        """Ids in byte order that start with `prefix`, strictly after `after`."""
        return ids_after(self._members.get(bucket_id, []), prefix, after)

    def put_bucket(self, meta: BucketMeta) -> None:
        self._buckets[meta.bucket_id] = meta

    def drop_bucket(self, bucket_id: str) -> None:
        """Forget the bucket record; its streams go only with their own tombstones."""
        self._buckets.pop(bucket_id, None)

    def soft_deleted(self) -> list[StreamMeta]:
        """Every stream deleted while it had forks, kept for them."""
        return [meta for meta in self._streams.values() if meta.soft_deleted]

    def forks_of(self, bucket_id: str, stream_id: str) -> list[StreamMeta]:
        """The streams forked from this one (expired ones included)."""
        ids = sorted(self._forks.get((bucket_id, stream_id), ()))
        return [self._streams[(bucket_id, fork_id)] for fork_id in ids]

    def put_stream(self, meta: StreamMeta) -> None:
        key = (meta.bucket_id, meta.stream_id)
        before = self._streams.get(key)
        if before is None:
            bisect.insort(self._members.setdefault(meta.bucket_id, []), meta.stream_id)
        elif before.forked_from != meta.forked_from:
            self._unlink(before)
        self._streams[key] = meta
        if meta.forked_from is not None:
            self._forks.setdefault((meta.bucket_id, meta.forked_from), set()).add(meta.stream_id)

    def drop_stream(self, bucket_id: str, stream_id: str, producers: bool = True) -> None:
        """Forget a stream, and its producer states unless the log says so separately."""
        if producers:
            self._producers.pop((bucket_id, stream_id), None)
        meta = self._streams.pop((bucket_id, stream_id), None)
        if meta is None:
            return
        self._unlink(meta)
        ids = self._members[bucket_id]
        del ids[bisect.bisect_left(ids, stream_id)]
        if not ids:
            del self._members[bucket_id]

    def _unlink(self, meta: StreamMeta) -> None:
        """Forget that `meta` is a fork of its source."""
        if meta.forked_from is None:
            return
        source = (meta.bucket_id, meta.forked_from)
        forks = self._forks.get(source, set())
        forks.discard(meta.stream_id)
        if not forks:
            self._forks.pop(source, None)

    def apply(self, key: str, value: bytes | None) -> None:
        """Apply one record of the meta topic, in log order: a value upserts, a tombstone
        removes. A stream's producer states are not touched: the producers topic has its own
        tombstones, written in the same transaction, and the two topics are replayed in no
        particular order relative to each other."""
        if value is None:
            self._forget(key)
            return
        record = decode(key, value)
        if isinstance(record, BucketMeta):
            self.put_bucket(record)
        elif isinstance(record, MountMeta):
            self.put_mount(record)
        else:
            self.put_stream(newer(self._streams.get((record.bucket_id, record.stream_id)), record))

    def _forget(self, key: str) -> None:
        if key.startswith("mount:"):
            self.drop_mount(key.removeprefix("mount:"))
            return
        bucket_id, stream_id = stream_of_key(key)
        if stream_id:
            self.drop_stream(bucket_id, stream_id, producers=False)
        else:
            self.drop_bucket(bucket_id)


def newer(current: StreamMeta | None, incoming: StreamMeta) -> StreamMeta:
    """The later of two states of a stream, keeping the later sliding-TTL access."""
    if current is None or current.created_at_ms != incoming.created_at_ms:
        return incoming
    if incoming.next_offset < current.next_offset or (
        incoming.next_offset == current.next_offset and current.closed and not incoming.closed
    ):
        return current
    return incoming.evolve(last_access_ms=max(current.last_access_ms, incoming.last_access_ms))
