"""Helm, built once from the Go module proxy and cached under the home, to render the chart."""

from __future__ import annotations

import shutil
from pathlib import Path

from devstack.paths import cache_dir
from devstack.process import ServiceError, run_checked

HELM_VERSION = "v3.22.0"


def binary() -> Path:
    """The `helm` executable, built with `go install` on first use (a few minutes)."""
    gobin = cache_dir() / f"helm-{HELM_VERSION}"
    exe = gobin / "helm"
    if exe.exists():
        return exe
    if shutil.which("go") is None:
        raise ServiceError("Go is needed to build Helm (go install helm.sh/helm/v3/cmd/helm)")
    run_checked(
        ["go", "install", f"helm.sh/helm/v3/cmd/helm@{HELM_VERSION}"],
        "building Helm with go install",
        env={"GOBIN": str(gobin), "GOFLAGS": "-trimpath"},
    )
    return exe


def is_cached() -> bool:
    return (cache_dir() / f"helm-{HELM_VERSION}" / "helm").exists()
