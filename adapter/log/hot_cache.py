"""The hot tail: recent messages of each stream this instance wrote, served without Kafka.

Every commit of this instance adds the data records it holds, with their Kafka offsets, so
for each stream the cache knows *all* of its messages from some offset (`since`) up to its
tail. A read that starts at or after `since` is answered from memory: live readers woken by
a commit get the new bytes without a round trip to the broker, and recent data stays
readable while the broker is away. The whole cache holds at most `budget_bytes` of payload
and the tails of at most `max_streams` streams (a tail costs memory even when empty: a stream
created without data); past either, the streams written longest ago are dropped whole (their
reads go to Kafka).
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, field

from adapter.log.reader import UNBOUNDED, Budget, ReadResult

# What remembering one message's trace context costs of the budget: a dict entry and its key
# (the value is shared by every message of the append).
TRACE_COST = 100


@dataclass
class _Tail:
    since: int  # every data record of the stream at or after this offset is below ...
    end: int  # ... up to this tail (exclusive)
    offsets: list[int] = field(default_factory=list)
    payloads: list[bytes] = field(default_factory=list)
    size: int = 0
    # Offset -> the `traceparent` its record carries (tracing on only: else always empty).
    traces: dict[int, bytes] = field(default_factory=dict)


class HotCache:
    def __init__(self, budget_bytes: int, max_streams: int | None = None) -> None:
        self.budget_bytes = budget_bytes
        self.max_streams = max_streams
        self._tails: OrderedDict[Hashable, _Tail] = OrderedDict()
        self._size = 0

    @property
    def size(self) -> int:
        return self._size

    def record(
        self,
        key: Hashable,
        since: int,
        end: int,
        offsets: list[int],
        payloads: list[bytes],
        trace: bytes | None = None,
    ) -> None:
        """Remember a commit's messages: the stream's tail moved from `since` to `end`;
        `trace`: the trace context their records carry (tracing on)."""
        tail = self._tails.pop(key, None)
        if tail is None or tail.end != since:  # a commit this cache did not see: start over
            if tail is not None:
                self._size -= tail.size
            tail = _Tail(since, end)
        tail.end = end
        tail.offsets += offsets
        tail.payloads += payloads
        added = sum(len(p) for p in payloads)
        if trace is not None:
            tail.traces.update(dict.fromkeys(offsets, trace))
            added += TRACE_COST * len(offsets)
        tail.size += added
        self._size += added
        self._tails[key] = tail  # most recently written last
        self._evict()

    def forget(self, key: Hashable) -> None:
        tail = self._tails.pop(key, None)
        if tail is not None:
            self._size -= tail.size

    def read(
        self, key: Hashable, start: int, stop: int, max_bytes: int, budget: Budget = UNBOUNDED
    ) -> ReadResult | None:
        """Messages in [start, stop) if the cache holds all of them, else None."""
        tail = self._held(key, start, stop)
        if tail is None:
            return None
        index = bisect.bisect_left(tail.offsets, start)
        first = index
        messages: list[bytes] = []
        taken = 0
        while index < len(tail.offsets) and tail.offsets[index] < stop:
            payload = tail.payloads[index]
            full = budget.full(taken, len(messages), len(payload))
            if full or (messages and taken + len(payload) > max_bytes):
                return ReadResult(
                    messages, tail.offsets[index], False, traces=_traces(tail, first, index)
                )
            messages.append(payload)
            taken += len(payload)
            index += 1
        return ReadResult(messages, stop, True, traces=_traces(tail, first, index))

    def first_offset(self, key: Hashable, start: int, stop: int) -> int | None:
        """The offset of the stream's first message in [start, stop) (`stop` if it has none
        there), if the cache holds them all; else None."""
        tail = self._held(key, start, stop)
        if tail is None:
            return None
        index = bisect.bisect_left(tail.offsets, start)
        return (
            tail.offsets[index]
            if index < len(tail.offsets) and tail.offsets[index] < stop
            else stop
        )

    def _held(self, key: Hashable, start: int, stop: int) -> _Tail | None:
        tail = self._tails.get(key)
        if tail is None or start < tail.since or stop > tail.end:
            return None
        return tail

    def _evict(self) -> None:
        limit = self.max_streams
        while self._tails and (
            self._size > self.budget_bytes or (limit is not None and len(self._tails) > limit)
        ):
            _key, oldest = self._tails.popitem(last=False)
            self._size -= oldest.size


def _traces(tail: _Tail, first: int, stop: int) -> list[bytes]:
    """The trace contexts of the tail's messages `first` to `stop` (indexes), each once."""
    if not tail.traces:
        return []  # tracing off: nothing to look up
    found = (tail.traces.get(offset) for offset in tail.offsets[first:stop])
    return list(dict.fromkeys(trace for trace in found if trace is not None))
