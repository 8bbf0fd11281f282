"""Memory a large request freed, given back to the system soon after it ends.

glibc keeps the heap's freed memory for reuse, and the block size above which it maps a
block of its own (and unmaps it when freed) rises to the size of each such block freed: a
body of several MiB (a coded body decoded, a large JSON array) therefore stayed resident
after its request ended (`make hostile`: 8 MiB a kind of body, past the 64 MiB of growth the
suite allows). Fixing that threshold low would make every large buffer, a read's answer
included, pay its page faults each time (measured: 1.7 ms instead of 0.1 ms for 2 MiB;
bench/results/recorded/2026-12-06-hostile-sessions-and-stalls.md). Instead, after a request
whose body was large, `malloc_trim` gives the heap's free pages back, on a thread, at most
once a second (a walk of the heap: a millisecond or so). Nothing is done where the C library
is not glibc.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import platform
import time
from collections.abc import Callable

LARGE_BYTES = 1 << 20  # a body this large (or coded, or of no declared length) is trimmed after
MIN_GAP_S = 1.0


def malloc_trim() -> Callable[[], object] | None:
    """glibc's `malloc_trim(0)`, or None where there is none."""
    if platform.libc_ver()[0] != "glibc":
        return None
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name is not None else None
        trim = None if libc is None else libc.malloc_trim
    except (OSError, AttributeError):
        return None
    return None if trim is None else lambda: trim(0)


class HeapTrim:
    def __init__(
        self,
        trim: Callable[[], object] | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.trim = trim
        self.clock = clock
        self._last = -MIN_GAP_S
        self._due = False
        self._running: asyncio.Task[None] | None = None
        self.trims = 0

    def after(self, body_bytes: int | None, coded: bool) -> None:
        """A request ended whose body declared `body_bytes` (None: no length declared)."""
        if self.trim is None or self._due:
            return
        if not coded and body_bytes is not None and body_bytes < LARGE_BYTES:
            return
        self._due = True
        wait_s = max(0.0, self._last + MIN_GAP_S - self.clock())
        asyncio.get_running_loop().call_later(wait_s, self._start)

    def _start(self) -> None:
        self._running = asyncio.create_task(self._run(), name="heap-trim")

    async def _run(self) -> None:
        self._last, self._due = self.clock(), False
        self.trims += 1
        if self.trim is not None:
            await asyncio.to_thread(self.trim)
