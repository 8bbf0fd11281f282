"""Builds the benchmarks' Go programs into the cache, once per version of their sources."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from devstack.paths import cache_dir

CACHE = cache_dir() / "bench"
GO_FALLBACK = Path("/usr/local/go/bin/go")


class GoBuildError(RuntimeError):
    """`go` is missing or the build failed."""


def go_binary() -> str:
    found = shutil.which("go") or (str(GO_FALLBACK) if GO_FALLBACK.exists() else None)
    if found is None:
        raise GoBuildError("no `go` on PATH (nor /usr/local/go/bin/go): needed for the benchmarks")
    return found


def build(source: Path, name: str, cache: Path = CACHE) -> Path:
    """`go build` of `source` into `cache` as `{name}-{hash of the sources}`; reused as is."""
    digest = hashlib.sha256()
    for path in sorted(source.glob("*")):
        if path.suffix in (".go", ".mod"):
            digest.update(path.name.encode() + path.read_bytes())
    binary = cache / f"{name}-{digest.hexdigest()[:12]}"
    if binary.exists():
        return binary
    cache.mkdir(parents=True, exist_ok=True)
    partial = binary.with_suffix(f".{os.getpid()}.tmp")  # never a half-written binary in place
    done = subprocess.run(
        [go_binary(), "build", "-o", str(partial), "."],
        cwd=source,
        env=os.environ | {"CGO_ENABLED": "0", "GOFLAGS": "-mod=mod"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise GoBuildError(f"go build of {source.name} failed: {done.stderr.strip()}")
    partial.replace(binary)
    return binary
