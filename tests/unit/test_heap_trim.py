"""After a request with a large body the heap's free pages go back to the system: at most
once a second, and never for small bodies."""

from __future__ import annotations

import asyncio
import platform
import subprocess
import sys
from collections.abc import Callable

import pytest

from adapter.heap_trim import LARGE_BYTES, MIN_GAP_S, HeapTrim

# Frees an 8 MiB buffer twice (the first free raises glibc's mapping threshold to its size, so
# the second comes from the heap and stays), then prints the resident growth, trimmed or not.
SCRIPT = """
import os, sys
from adapter.heap_trim import malloc_trim
def resident():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
before = resident()
for _ in range(2):
    block = bytearray(8 << 20)
    block[::4096] = b"x" * len(block[::4096])  # touched: resident while held
    keep = bytearray(64)  # something above it, so the freed block is not the heap's top
    del block
if sys.argv[1] == "trimmed":
    malloc_trim()()
print(resident() - before)
"""


def _growth(mode: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, check=True
    )
    return int(done.stdout)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the C library is not glibc")
def test_a_large_buffer_freed_stays_resident_until_trimmed() -> None:
    assert _growth("kept") >= 4 << 20
    assert _growth("trimmed") < 1 << 20


async def _until(done: Callable[[], bool]) -> None:
    for _ in range(300):
        if done():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("not done in 6 s")


async def test_a_trim_follows_large_coded_or_unbounded_bodies_at_most_once_a_second() -> None:
    trims: list[float] = []
    loop = asyncio.get_running_loop()
    heap = HeapTrim(lambda: trims.append(loop.time()))
    heap.after(LARGE_BYTES - 1, coded=False)  # small: nothing
    await asyncio.sleep(0.05)
    assert trims == []
    heap.after(LARGE_BYTES, coded=False)
    heap.after(None, coded=False)  # already due: one trim for both
    await _until(lambda: len(trims) == 1)
    heap.after(10, coded=True)  # coded: may have decoded to anything; waits out the gap
    await _until(lambda: len(trims) == 2)
    # Never two within a second: the gap is kept between the trims' starts on the loop; each
    # is timed here on its thread, which may start a little late (hence the margin).
    assert trims[1] - trims[0] >= MIN_GAP_S - 0.1
    await asyncio.sleep(0.1)
    assert len(trims) == 2  # the second `after` while due added none
