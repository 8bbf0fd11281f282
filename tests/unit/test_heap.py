"""With the mapping threshold fixed, a large buffer freed leaves nothing resident behind."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

# Frees an 8 MiB buffer twice (the first free raises glibc's threshold to its size when it is
# not fixed, so the second comes from the heap and stays), then prints the resident growth.
SCRIPT = """
import os, sys
from adapter.heap import fix_mmap_threshold
if sys.argv[1] == "fixed":
    assert fix_mmap_threshold()
def resident():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
before = resident()
for _ in range(2):
    block = bytearray(8 << 20)
    block[::4096] = b"x" * len(block[::4096])  # touched: resident while held
    del block
print(resident() - before)
"""


def _growth(mode: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, check=True
    )
    return int(done.stdout)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the C library is not glibc")
def test_a_large_buffer_freed_is_given_back_once_the_threshold_is_fixed() -> None:
    assert _growth("dynamic") >= 4 << 20  # glibc's own: kept in the heap
    assert _growth("fixed") < 1 << 20
