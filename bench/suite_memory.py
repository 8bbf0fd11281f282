"""Resident memory as streams pile up: create in bulk with the Go generator, sample VmRSS."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench import loadgen_run, targets
from bench.suite_servers import Deployment

BATCH = 1000


def streams_memory(
    binary: Path, deployment: Deployment, milestones: list[int], time_cap_s: float, tag: str
) -> dict[str, Any]:
    """Create streams in batches up to each milestone; RSS (sum over instances) at each.

    Stops early when `time_cap_s` is spent, and says how far it got.
    """
    result: dict[str, Any] = {"target": deployment.name, "points": [], "errors": 0}
    result["rss_start_kib"] = _rss(deployment)
    created, started = 0, time.monotonic()
    flags: dict[str, object] = {"mode": "create", "base": deployment.bases, "concurrency": 50}
    flags["prefix"] = f"m-{tag}-"
    for milestone in sorted(milestones):
        while created < milestone:
            if time.monotonic() - started > time_cap_s:
                result["stopped"] = f"time cap {time_cap_s:g} s reached at {created} streams"
                return result
            count = min(BATCH, milestone - created)
            outcome = loadgen_run.run(binary, flags | {"start": created, "count": count}, 300)
            result["errors"] += int(outcome.report["errors"])
            created += count
        time.sleep(1)  # let the server settle before sampling
        elapsed = time.monotonic() - started
        point = {"streams": created, "rss_kib": _rss(deployment), "elapsed_s": round(elapsed, 1)}
        result["points"].append(point)
        if not deployment.alive():
            result["stopped"] = "a server exited"
            return result
    return result


def _rss(deployment: Deployment) -> int:
    return sum(targets.rss_kib(pid) for pid in deployment.pids)


def flatness(result: dict[str, Any]) -> float | None:
    """RSS at the last point / RSS at the first (1.0 = flat)."""
    points = result["points"]
    if len(points) < 2 or not points[0]["rss_kib"]:
        return None
    return float(points[-1]["rss_kib"]) / float(points[0]["rss_kib"])
