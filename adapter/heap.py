"""The C heap's threshold for giving large blocks their own mapping, fixed at start.

glibc serves a block of at least `M_MMAP_THRESHOLD` with a mapping of its own, returned to
the system when freed. The threshold starts at 128 KiB but rises, up to 32 MiB, to the size
of each such block freed, after which blocks of that size come from the heap and stay
resident once freed. A request of a few MiB (a coded body decoded, a large JSON array split)
thus left its size in the resident set after it ended: `make hostile` measured 8 MiB kept per
kind of bomb, past the 64 MiB the suite allows. Fixing the threshold at 1 MiB keeps every
block of a MiB or more in a mapping of its own, returned when freed, and stops the rise.
Smaller blocks (almost all of them: requests, records, librdkafka's buffers) are unchanged.
Nothing is done where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import platform

log = logging.getLogger(__name__)

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
THRESHOLD_BYTES = 1 << 20


def fix_mmap_threshold(threshold: int = THRESHOLD_BYTES) -> bool:
    """Fix glibc's mapping threshold at `threshold` bytes; whether it was set."""
    if platform.libc_ver()[0] != "glibc":
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        done = bool(libc.mallopt(M_MMAP_THRESHOLD, threshold))
    except (OSError, AttributeError):
        return False
    if not done:
        log.warning("could not fix the C heap's mapping threshold at %d bytes", threshold)
    return done
