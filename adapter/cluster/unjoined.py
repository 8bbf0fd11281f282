"""How long the owners' consumer has been subscribed without being a member of its group, and
when that is long enough to make it again (`adapter/cluster/ownership.py` says why)."""

from __future__ import annotations

UNJOINED_SESSIONS = 5  # sessions without membership before the consumer is made again
MIN_UNJOINED_S = 30.0


def unjoined_s(session_timeout_ms: int) -> float:
    """How long the owners' consumer may be subscribed without being a member before it is made
    again (why: `adapter/cluster/ownership.py`): five sessions, at least 30 s, so that a join
    waiting for a slow rebalance or a broker still starting is not cut short over and over."""
    return max(MIN_UNJOINED_S, UNJOINED_SESSIONS * session_timeout_ms / 1000)


class Unjoined:
    """Since when the consumer has been subscribed without being a member, and whether for
    longer than `limit_s`."""

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self.since: float | None = None

    def too_long(self, unjoined: bool, now: float) -> bool:
        if not unjoined:
            self.since = None
            return False
        if self.since is None:
            self.since = now
        return now - self.since > self.limit_s
