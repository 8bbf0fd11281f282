"""The manifest of the cold tier: tiered ranges of bucket-topic partitions, and their index.

A `TierRange` says that every committed data record of one partition at offsets [start, end)
is in one of its chunks (one per stream that has records there), or was collected: a chunk
the collector dropped stays listed without an object (`TierChunk.collected`). It is one record
of the compacted tier topic, so a range and all its chunks become visible together or not at
all. Ranges of a partition are contiguous: each pass starts where the last one ended.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from topology.internal_records import (
    RecordKind,
    decode_value,
    encode_value,
    range_key,
    range_of_key,
)


@dataclass(frozen=True)
class TierChunk:
    stream_id: str
    object_key: str
    first_offset: int
    last_offset: int
    count: int
    payload_bytes: int
    object_bytes: int

    @property
    def collected(self) -> bool:
        """Dropped by the collector (no stream needed it any more): the range still names the
        stream, so a reader that reaches these offsets is told they are gone, never given an
        empty answer as if the stream had no messages there."""
        return not self.object_key

    def as_collected(self) -> TierChunk:
        return TierChunk(self.stream_id, "", self.first_offset, self.last_offset, 0, 0, 0)


@dataclass(frozen=True)
class TierRange:
    bucket_id: str
    topic: str
    bucket_created_at_ms: int
    partition: int
    start: int
    end: int
    tiered_at_ms: int
    chunks: tuple[TierChunk, ...]

    @property
    def place(self) -> Place:
        return Place(self.topic, self.bucket_created_at_ms, self.partition)

    @property
    def key(self) -> str:
        return range_key(self.topic, self.bucket_created_at_ms, self.partition, self.start)

    @property
    def stored(self) -> tuple[TierChunk, ...]:
        """The chunks that have an object (not collected)."""
        return tuple(chunk for chunk in self.chunks if not chunk.collected)

    def chunk_of(self, stream_id: str) -> TierChunk | None:
        for chunk in self.chunks:
            if chunk.stream_id == stream_id:
                return chunk
        return None


@dataclass(frozen=True, order=True)
class Place:
    """One partition of one incarnation of a bucket topic."""

    topic: str
    epoch_ms: int  # the bucket's created_at_ms
    partition: int


def encode(tier_range: TierRange) -> bytes:
    data = vars(tier_range) | {"chunks": [vars(chunk) for chunk in tier_range.chunks]}
    return encode_value(RecordKind.TIER_RANGE, data)


def decode(key: str, value: bytes) -> TierRange:
    data = decode_value(RecordKind.TIER_RANGE, value, key)
    chunks = tuple(TierChunk(**chunk) for chunk in data.pop("chunks"))
    return TierRange(**data, chunks=chunks)


class TierIndex:
    """Every tiered range, by partition and start: which range covers an offset."""

    def __init__(self) -> None:
        self._starts: dict[Place, list[int]] = {}
        self._ranges: dict[Place, dict[int, TierRange]] = {}

    def put(self, tier_range: TierRange) -> None:
        place, start = tier_range.place, tier_range.start
        ranges = self._ranges.setdefault(place, {})
        if start not in ranges:
            bisect.insort(self._starts.setdefault(place, []), start)
        ranges[start] = tier_range

    def drop(self, place: Place, start: int) -> None:
        ranges = self._ranges.get(place, {})
        if ranges.pop(start, None) is not None:
            starts = self._starts[place]
            del starts[bisect.bisect_left(starts, start)]
        if not ranges:
            self._ranges.pop(place, None)
            self._starts.pop(place, None)

    def apply(self, key: str, value: bytes | None) -> None:
        """Apply one record of the tier topic (a tombstone forgets its range)."""
        if value is not None:
            self.put(decode(key, value))
            return
        topic, epoch_ms, partition, start = range_of_key(key)
        self.drop(Place(topic, epoch_ms, partition), start)

    def covering(self, place: Place, offset: int) -> TierRange | None:
        """The range holding `offset`, if it is tiered."""
        starts = self._starts.get(place)
        if not starts:
            return None
        index = bisect.bisect_right(starts, offset) - 1
        if index < 0:
            return None
        found = self._ranges[place][starts[index]]
        return found if offset < found.end else None

    def tiered_to(self, place: Place) -> int | None:
        """The end of the last range of the partition: where the next pass starts."""
        starts = self._starts.get(place)
        return self._ranges[place][starts[-1]].end if starts else None

    def ranges(self, place: Place) -> list[TierRange]:
        return [self._ranges[place][start] for start in self._starts.get(place, [])]

    def places(self) -> list[Place]:
        return sorted(self._ranges)
