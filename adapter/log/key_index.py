"""The per-key index of a mounted topic: where each key's records are, in bounded memory.

For every key seen, the read positions (`topology/mount_positions.py`) of its newest records, in
order, 8 bytes each, and at most `max_positions` of them: when a key outgrows that, its older
half is dropped and remembered only as "records from `first` up to `dense_from`, not listed".
A read inside the listed range fetches exactly those records; a read below it scans the
key's partitions in that range, filtering by key (bounded per request like any catch-up
read). So memory per key is bounded by `max_positions` and a catch-up read of a key never
scans the rest of the topic except in a dropped range.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterator
from dataclasses import dataclass

from topology.listing import ids_after
from topology.mount_positions import split


class KeyPlaces:
    """Where one key's records are."""

    __slots__ = ("content_type", "dense_from", "first", "partitions", "positions")

    def __init__(self, at: int, content_type: str | None) -> None:
        self.positions = array("q", [at])  # sorted; every record of the key at >= dense_from
        self.first = at  # the key's first record seen
        self.dense_from = at
        self.partitions = _shared((split(at)[0],))  # sorted
        self.content_type = content_type  # from the first record's header, if named

    @classmethod
    def restored(
        cls,
        positions: array[int],
        first: int,
        dense_from: int,
        partitions: tuple[int, ...],
        content_type: str | None,
    ) -> KeyPlaces:
        """Places as `key_index_store` saved them."""
        places = cls(positions[0], content_type)
        places.positions = positions
        places.first, places.dense_from = first, dense_from
        places.partitions = _shared(partitions)
        return places

    @property
    def tail(self) -> int:
        """The position after the key's last record: its stream's next offset."""
        return self.positions[-1] + 1

    def add(self, at: int, max_positions: int) -> None:
        partition = split(at)[0]
        if partition not in self.partitions:
            self.partitions = _shared(tuple(sorted((*self.partitions, partition))))
        dropped = self.dense_from > self.first  # some of its records are not listed
        if at > self.positions[-1]:
            self.positions.append(at)
        elif dropped and at < self.dense_from:
            self.first = min(self.first, at)  # below the listed range: found by scanning
        else:
            # A key in several partitions (after a partition-count increase), read interleaved.
            index = bisect.bisect_left(self.positions, at)
            if index == len(self.positions) or self.positions[index] != at:
                self.positions.insert(index, at)
        if not dropped:
            self.first = self.dense_from = self.positions[0]
        if len(self.positions) > max_positions:
            del self.positions[: len(self.positions) // 2]
            self.dense_from = self.positions[0]

    def listed_from(self, start: int, count: int) -> list[int]:
        """Up to `count` listed positions at or after `start`."""
        index = bisect.bisect_left(self.positions, start)
        return self.positions[index : index + count].tolist()


_PARTITION_SETS: dict[tuple[int, ...], tuple[int, ...]] = {}


def _shared(partitions: tuple[int, ...]) -> tuple[int, ...]:
    """One tuple per distinct set of partitions, shared by every key in them (a few exist)."""
    return _PARTITION_SETS.setdefault(partitions, partitions)


@dataclass
class Counts:
    records: int = 0  # indexed: addressable key, non-null value
    null_keys: int = 0
    tombstones: int = 0  # null values (skipped)
    unaddressable: int = 0  # keys no stream id can name (too long once encoded)

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))


class KeyIndex:
    def __init__(self, max_positions: int, track_changes: bool = False) -> None:
        self.max_positions = max_positions
        self.counts = Counts()
        self._keys: dict[str, KeyPlaces] = {}
        self._sorted: list[str] | None = []  # the ids in order, rebuilt lazily after new keys
        # Keys changed since `take_changed` (for `key_index_store`); None: not tracked.
        self._changed: set[str] | None = set() if track_changes else None

    def __len__(self) -> int:
        return len(self._keys)

    def places(self, stream_id: str) -> KeyPlaces | None:
        return self._keys.get(stream_id)

    def add(self, stream_id: str, at: int, content_type: str | None) -> None:
        self.counts.records += 1
        if self._changed is not None:
            self._changed.add(stream_id)
        places = self._keys.get(stream_id)
        if places is None:
            self._keys[stream_id] = KeyPlaces(at, content_type)
            self._sorted = None
        else:
            places.add(at, self.max_positions)

    def restore(self, stream_id: str, places: KeyPlaces) -> None:
        self._keys[stream_id] = places
        self._sorted = None

    def adopt(self, other: KeyIndex) -> None:
        """Take over `other`'s keys and counts (an index loaded off the event loop)."""
        self._keys, self.counts, self._sorted = other._keys, other.counts, None

    def take_changed(self) -> set[str]:
        """The keys changed since the last call (none when changes are not tracked)."""
        changed = self._changed or set()
        if self._changed is not None:
            self._changed = set()
        return changed

    def ids(self, prefix: str, after: str | None) -> Iterator[str]:
        """Ids in code point order that start with `prefix`, strictly after `after`."""
        if self._sorted is None:
            self._sorted = sorted(self._keys)
        return ids_after(self._sorted, prefix, after)
