"""The resident-memory cap an instance enforces (`max_memory_bytes`), `auto` by default: a share
of the container's memory limit, so a pod answers 503 and sheds load before the kernel's OOM
killer ends it (and every request in flight with it)."""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger(__name__)

# The limit of the cgroup (v2) this process runs in: a container's `resources.limits.memory`.
# Absent outside a container (the root cgroup has none) and on cgroup v1 hosts.
CGROUP_MEMORY_MAX = Path("/sys/fs/cgroup/memory.max")
# `max_memory_bytes`'s stored value for `auto` (its declaration in adapter/settings.py).
AUTO = -1
# Of the container's limit: the rest is headroom for what is allocated between two looks at
# the resident size (every 50 ms) and for memory Python does not give back at once.
SHARE = 0.75


def container_limit(path: Path = CGROUP_MEMORY_MAX) -> int | None:
    """The container's memory limit in bytes; None when it has none (`max`) or none is known."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if not text.isdigit():  # "max": unlimited
        return None
    return int(text)


def memory_cap(configured: int, path: Path = CGROUP_MEMORY_MAX) -> int:
    """The cap in bytes (0: none): `configured` unless it is `auto`, then SHARE of the
    container's limit, or none without one."""
    if configured != AUTO:
        return configured
    limit = container_limit(path)
    if limit is None:
        return 0
    cap = int(limit * SHARE)
    log.info(
        "max_memory_bytes auto: %d (%d%% of the container's memory limit, %d)",
        cap,
        round(SHARE * 100),
        limit,
    )
    return cap
