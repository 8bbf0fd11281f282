"""Tools built once from the Go module proxy and cached under the home (MinIO, Helm, promtool,
Jaeger): each in a folder of its own, named for its version."""

from __future__ import annotations

import shutil
import tempfile
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
    # Built as a tool of a module of its own (`go get -tool`, then `go build`): for a program
    # whose go.mod has replace directives, which `go install pkg@version` refuses.
    as_tool: bool = False

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
        if self.as_tool:
            self._build_as_tool(exe)
            return exe
        run_checked(
            ["go", "install", f"{self.package}@{self.version}"],
            f"building {self.title} with go install",
            env={"GOBIN": str(exe.parent), "GOFLAGS": "-trimpath"},
        )
        return exe

    def _build_as_tool(self, exe: Path) -> None:
        """`go get -tool` in a throwaway module, then `go build` of the tool into the cache
        (its dependencies are resolved from its go.mod as a dependency's, without its replace
        directives)."""
        with tempfile.TemporaryDirectory(prefix=f"{self.name}-build-") as folder:
            step = f"building {self.title} as a Go tool"
            in_module = ["go", "-C", folder]
            run_checked([*in_module, "mod", "init", f"build.local/{self.name}"], step)
            run_checked([*in_module, "get", "-tool", f"{self.package}@{self.version}"], step)
            exe.parent.mkdir(parents=True, exist_ok=True)
            partial = exe.with_name(f"{exe.name}.partial")  # never a half-written executable
            build = [*in_module, "build", "-trimpath", "-o", str(partial), self.package]
            run_checked(build, step)
            partial.replace(exe)

    def is_cached(self) -> bool:
        return self.path.exists()
