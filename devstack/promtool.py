"""promtool, built once from the Go module proxy and cached under the home, to check and
unit-test the Prometheus alerting rules in `deploy/monitoring/`."""

from __future__ import annotations

import shutil
from pathlib import Path

from devstack.paths import cache_dir
from devstack.process import ServiceError, run_checked

# Prometheus 3.x's Go module versions are v0.3xx (the Go proxy serves no v3 module path).
PROMETHEUS_VERSION = "v0.316.0"


def binary() -> Path:
    """The `promtool` executable, built with `go install` on first use (several minutes)."""
    gobin = cache_dir() / f"promtool-{PROMETHEUS_VERSION}"
    exe = gobin / "promtool"
    if exe.exists():
        return exe
    if shutil.which("go") is None:
        raise ServiceError(
            "Go is needed to build promtool (go install "
            "github.com/prometheus/prometheus/cmd/promtool)"
        )
    run_checked(
        ["go", "install", f"github.com/prometheus/prometheus/cmd/promtool@{PROMETHEUS_VERSION}"],
        "building promtool with go install",
        env={"GOBIN": str(gobin), "GOFLAGS": "-trimpath"},
    )
    return exe


def is_cached() -> bool:
    return (cache_dir() / f"promtool-{PROMETHEUS_VERSION}" / "promtool").exists()
