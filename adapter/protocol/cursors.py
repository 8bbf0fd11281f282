"""Stream-Cursor values for live reads (§8.1): 20-second intervals since 2024-10-09T00:00:00Z.

A cursor only ever moves forward: when the client's cursor is not behind the current interval,
the answer is strictly greater than the client's, by a random jitter of 1 to 3600 seconds
(in whole intervals, at least one), so a CDN never serves the same cached empty answer forever.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TypeGuard

EPOCH_MS = 1_728_432_000_000  # 2024-10-09T00:00:00Z
INTERVAL_S = 20
MAX_JITTER_S = 3600


def current_interval(now_ms: int) -> int:
    return (now_ms - EPOCH_MS) // (INTERVAL_S * 1000)


def next_cursor(
    now_ms: int, client_cursor: str | None, jitter_s: Callable[[], int] | None = None
) -> str:
    """The cursor to answer with, given the `cursor` query parameter the client echoed."""
    interval = current_interval(now_ms)
    return cursor_after(interval, parse_cursor(client_cursor), jitter_s)


def cursor_after(
    interval: int, client: int | None, jitter_s: Callable[[], int] | None = None
) -> str:
    """The cursor for a client whose cursor was parsed already (None: none or unreadable)."""
    if jitters(client, interval):
        seconds = (jitter_s or _random_jitter)()
        return str(client + max(1, seconds // INTERVAL_S))
    return str(interval)


def jitters(client: int | None, interval: int) -> TypeGuard[int]:
    """Whether the client's cursor is not behind: its answer is its own, not the interval."""
    return client is not None and client >= interval


def parse_cursor(value: str | None) -> int | None:
    if value is None or not (value.isascii() and value.isdigit()) or len(value) > 18:
        return None
    return int(value)


def _random_jitter() -> int:
    return random.randint(1, MAX_JITTER_S)
