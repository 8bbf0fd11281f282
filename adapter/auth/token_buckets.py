"""Token buckets per key (principal, bucket): requests and appended bytes per second.

A key's bucket fills at `rate` up to `burst`. A request is let in while the bucket holds at
least one unit and then takes its whole cost, so the level may go below zero: a body larger
than the burst still passes once, and the next ones wait until the debt is paid. The keys
kept are bounded (least recently used dropped first): a dropped key starts full again.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass

MAX_KEYS = 100_000


@dataclass
class _Level:
    units: float
    stamp: float


class RateLimiter:
    def __init__(self, rate: float, burst: float, max_keys: int = MAX_KEYS) -> None:
        self.rate = rate
        self.burst = max(burst, 1.0)
        self.max_keys = max_keys
        self._levels: OrderedDict[object, _Level] = OrderedDict()

    def take(self, key: object, cost: float, now: float) -> int:
        """Take `cost` units for `key`: 0 when let in, else the whole seconds to wait."""
        level = self._level(key, now)
        if level.units < 1:
            return max(1, math.ceil((1 - level.units) / self.rate))
        level.units -= cost
        return 0

    def charge(self, key: object, cost: float, now: float) -> None:
        """Take units after the fact (a body whose size was not known up front)."""
        self._level(key, now).units -= cost

    def _level(self, key: object, now: float) -> _Level:
        level = self._levels.pop(key, None)
        if level is None:
            level = _Level(self.burst, now)
            if len(self._levels) >= self.max_keys:
                self._levels.popitem(last=False)
        else:
            elapsed = max(0.0, now - level.stamp)
            level.units = min(self.burst, level.units + elapsed * self.rate)
            level.stamp = now
        self._levels[key] = level
        return level


class ReaderCap:
    """Live readers (long-polls and SSE responses) in flight per key, up to `limit`."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.live: dict[object, int] = {}

    def enter(self, key: object) -> bool:
        count = self.live.get(key, 0)
        if count >= self.limit:
            return False
        self.live[key] = count + 1
        return True

    def leave(self, key: object) -> None:
        count = self.live.get(key, 0) - 1
        if count > 0:
            self.live[key] = count
        else:
            self.live.pop(key, None)
