"""The state of buckets, streams, producers, slot owners and snapshots, as the protocol's rules
see it: plain values with their keys. How they are stored in Kafka is `adapter/state/records.py`,
their keys and bytes spelled in `topology/internal_records.py`."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, NamedTuple, Self

from topology.internal_records import (
    mount_key,
    owner_key,
    producer_key,
    snapshot_key,
    stream_meta_key,
)
from topology.wire import housed_key


@dataclass(frozen=True)
class BucketMeta:
    bucket_id: str
    topic: str
    partitions: int
    created_at_ms: int
    retention_max_age_ms: int | None = None  # age retention (`protocol/bucket_config.py`)
    config_version: int = 0  # grows with every `PUT /{bucket}/config`: part of its ETag


@dataclass(frozen=True)
class MountMeta:
    """An existing topic served as a bucket (`adapter/protocol/mounts.py`)."""

    bucket_id: str
    topic: str
    content_type: str
    content_type_header: str | None
    key_encoding: str
    appends: bool
    created_at_ms: int

    @property
    def key(self) -> str:
        return mount_key(self.bucket_id)


class Segment(NamedTuple):
    """Part of a fork's history: the records keyed `stream_id` at Kafka offsets [start, end)
    (a stream's `record_id`: its id, or for a fork housed in another bucket `bucket//id`)."""

    stream_id: str
    start: int
    end: int


@dataclass(frozen=True)
class StreamMeta:
    bucket_id: str
    stream_id: str
    partition: int
    content_type: str
    created_at_ms: int
    start_offset: int
    next_offset: int
    last_access_ms: int
    last_write_at_ms: int
    closed: bool = False
    ttl_seconds: int | None = None
    expires_at_ms: int | None = None
    last_seq: str | None = None
    message_count: int = 0
    forked_from: str | None = None
    fork_offset: int | None = None
    fork_sub_offset: int = 0
    inherited: tuple[Segment, ...] = ()
    soft_deleted: bool = False
    retained_from: int | None = None
    fencing_token: str | None = None  # what appends must carry in `Stream-Fencing-Token`
    trimmed_to: int | None = None  # `POST {stream}/trim`: its messages below are removed
    trimmed_at_ms: int | None = None  # when `trimmed_to` last moved (storage follows later)
    # What storage follows when trims come more often than the grace period (`trims.trimmed`):
    # a point every instance had followed for it, and an earlier one waiting it out.
    trim_settled_to: int | None = None
    trim_settling_to: int | None = None
    trim_settling_at_ms: int | None = None
    source_bucket: str | None = None  # the bucket of `forked_from`, when not its own
    home: str | None = None  # the bucket whose topic holds its records, when not its own

    @property
    def key(self) -> str:
        return stream_meta_key(self.bucket_id, self.stream_id)

    @property
    def data_bucket(self) -> str:
        """The bucket whose topic holds its records: its own, or for a fork across buckets
        its source's (a fork lives in its source's partition)."""
        return self.bucket_id if self.home is None else self.home

    @property
    def source(self) -> tuple[str, str] | None:
        """(bucket, stream) of the stream it was forked from, if any."""
        if self.forked_from is None:
            return None
        bucket_id = self.bucket_id if self.source_bucket is None else self.source_bucket
        return bucket_id, self.forked_from

    @property
    def record_id(self) -> str:
        """What its records are keyed by in its partition (`housed_key`)."""
        return housed_key(self.bucket_id, self.stream_id, self.home)

    @property
    def earliest_offset(self) -> int:
        """The first offset still readable: the further of its snapshot's and its trim's, else
        the start of its history."""
        floor = self.history_start if self.retained_from is None else self.retained_from
        return floor if self.trimmed_to is None else max(floor, self.trimmed_to)

    @property
    def retains(self) -> bool:
        """Whether a snapshot or a trim moved its earliest offset (reads below answer 410)."""
        return self.retained_from is not None or self.trimmed_to is not None

    @property
    def snapshot_offset(self) -> int | None:
        """Where its visible snapshot is: where it retains from, unless a trim went past it
        (the messages that would follow that snapshot are gone, so it rebuilds nothing)."""
        if self.retained_from is None or self.earliest_offset > self.retained_from:
            return None
        return self.retained_from

    @property
    def history_start(self) -> int:
        """The first offset of the stream's history: its inherited range's, or its own."""
        return self.inherited[0].start if self.inherited else self.start_offset

    def segments(self) -> tuple[Segment, ...]:
        """Its whole history as ranges of its partition: inherited ones, then its own."""
        return (*self.inherited, Segment(self.record_id, self.start_offset, self.next_offset))

    def deadline_ms(self) -> int | None:
        """When the stream expires: absolute, or the end of its sliding TTL window."""
        if self.expires_at_ms is not None:
            return self.expires_at_ms
        if self.ttl_seconds is not None:
            return self.last_access_ms + self.ttl_seconds * 1000
        return None

    def expired(self, now_ms: int) -> bool:
        deadline = self.deadline_ms()
        return deadline is not None and now_ms >= deadline

    def evolve(self, **changes: Any) -> Self:
        """A copy with `changes`: `dataclasses.replace` without re-running `__init__` (several
        per append; the fields are immutable values, so a shallow copy is a true one)."""
        if not changes.keys() <= _STREAM_FIELDS:
            raise TypeError(f"StreamMeta has no field {sorted(changes.keys() - _STREAM_FIELDS)}")
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__, **changes)
        return copy


_STREAM_FIELDS = frozenset(field.name for field in fields(StreamMeta))


@dataclass(frozen=True)
class ProducerRecord:
    bucket_id: str
    stream_id: str
    producer_id: str
    epoch: int
    last_seq: int
    updated_at_ms: int

    @property
    def key(self) -> str:
        return producer_key(self.bucket_id, self.stream_id, self.producer_id)


# The URL of an owner record by which a slot's owner let it go at a clean hand-over, after its
# last commit: the slot has no owner until the next one's record, and a forwarder waiting on a
# write it sent learns its outcome from the log at once (`adapter/http/forward.py`).
RELEASED = ""


@dataclass(frozen=True)
class SlotOwner:
    slot: int
    url: str  # `RELEASED`: none
    since_ms: int

    @property
    def key(self) -> str:
        return owner_key(self.slot)


@dataclass(frozen=True)
class SnapshotPointer:
    """Where the latest snapshot of a stream is: its blob in the object store, and what it is."""

    bucket_id: str
    stream_id: str
    offset: int
    content_type: str
    size: int
    object_key: str
    sha256: str
    stream_created_at_ms: int
    published_at_ms: int

    @property
    def key(self) -> str:
        return snapshot_key(self.bucket_id, self.stream_id)

    def belongs_to(self, meta: StreamMeta) -> bool:
        """Whether this is the stream's visible snapshot (not one of an earlier stream)."""
        return (
            meta.created_at_ms == self.stream_created_at_ms and meta.snapshot_offset == self.offset
        )
