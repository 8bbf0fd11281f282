"""The C heap's threshold for giving large blocks their own mapping, fixed at start.

glibc serves a block of at least `M_MMAP_THRESHOLD` with a mapping of its own, returned to
the system when freed. The threshold starts at 128 KiB but rises, up to 32 MiB, to the size
of each such block freed, after which blocks of that size come from the heap and stay
resident once freed. A request of a few MiB (a coded body decoded, a large JSON array split)
thus left its size in the resident set after it ended: `make hostile` measured 8 MiB kept per
kind of bomb, past the 64 MiB the suite allows. Fixing the threshold at 4 MiB keeps every
block of 4 MiB or more in a mapping of its own, returned when freed, and stops the rise; such
a block costs its page faults each time (an 8 MiB copy: ~6 ms instead of ~0.4 ms on this
machine), which only appends and reads of messages that large pay. Smaller blocks (almost
all of them: requests, records, librdkafka's buffers) come from the heap as before.
Nothing is done where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import platform

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters
M_MMAP_THRESHOLD = -3
THRESHOLD_BYTES = 4 << 20
# Fixing the mapping threshold also stops glibc raising the trim threshold with it, which
# would stay at 128 KiB: every block between the two freed at the heap's top would be given
# back and asked for again (a 2 MiB body copied and freed: 9 times slower, measured). Twice
# the mapping threshold keeps such blocks as glibc's own adjustment would.


def fix_mmap_threshold(threshold: int = THRESHOLD_BYTES) -> bool:
    """Fix glibc's mapping threshold at `threshold` bytes (and its trim threshold at twice
    that); whether it was set."""
    if platform.libc_ver()[0] != "glibc":
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        done = bool(libc.mallopt(M_MMAP_THRESHOLD, threshold))
        done = bool(libc.mallopt(M_TRIM_THRESHOLD, 2 * threshold)) and done
    except (OSError, AttributeError):
        return False
    if not done:
        log.warning("could not fix the C heap's mapping threshold at %d bytes", threshold)
    return done
