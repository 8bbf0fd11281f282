"""Tools built once with `go install` from the Go module proxy and cached under the home
(MinIO, Helm, promtool): each in a folder of its own, named for its version."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from devstack.paths import cache_dir
from devstack.process import ServiceError, run_checked


@dataclass(frozen=True)
class GoTool:
    name: str  # the executable's, and the cache folder's stem
    title: str  # for messages: "MinIO", "Helm"
    package: str  # what `go install` builds, without the version
    version: str

    @property
    def path(self) -> Path:
        return cache_dir() / f"{self.name}-{self.version}" / self.name

    def binary(self) -> Path:
        """The executable, built with `go install` on first use (minutes)."""
        exe = self.path
        if exe.exists():
            return exe
        if shutil.which("go") is None:
            raise ServiceError(f"Go is needed to build {self.title} (go install {self.package})")
        run_checked(
            ["go", "install", f"{self.package}@{self.version}"],
            f"building {self.title} with go install",
            env={"GOBIN": str(exe.parent), "GOFLAGS": "-trimpath"},
        )
        return exe

    def is_cached(self) -> bool:
        return self.path.exists()
