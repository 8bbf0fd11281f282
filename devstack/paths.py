"""Where the local stack caches downloads and keeps its data."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def cache_dir() -> Path:
    """Downloads and builds shared by every clone on this machine (under the user's home)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "durable-kafka"


def data_dir() -> Path:
    """Per-clone state of the long-running local stack (`make up`, `make run`)."""
    return PROJECT_ROOT / ".data"
