"""The release before the newest record format level, built from this repository's history:
its own git worktree and venv (uv, from the cache `make deps` fills), made once and kept
under ~/.cache/durable-kafka, so a rolling upgrade can start instances of it beside this head.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

# The last commit that writes format level 6 (`PREVIOUS_LEVEL`): its `NEWEST_LEVEL` is 6, so
# every append commits its stream's StreamMeta with its data record
# (`git show 7b39fe6:topology/internal_records.py | grep NEWEST_LEVEL`).
COMMIT = "7b39fe6"
REPO = Path(__file__).resolve().parents[2]
CACHE = Path.home() / ".cache" / "durable-kafka"
HOME = CACHE / "releases" / f"format-6-{COMMIT}"
BUILD_TIMEOUT_S = 900.0


def script() -> str:
    """The previous release's `durable-kafka`, its worktree and venv built if they are not."""
    built = HOME / ".venv" / "bin" / "durable-kafka"
    if built.exists():
        return str(built)
    if not (HOME / "pyproject.toml").exists():
        HOME.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "worktree", "prune"], cwd=REPO, check=True)
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(HOME), COMMIT],
            cwd=REPO,
            check=True,
            capture_output=True,
            timeout=120,
        )
    subprocess.run(
        [_uv(), "sync", "--frozen"],
        cwd=HOME,
        check=True,
        capture_output=True,
        timeout=BUILD_TIMEOUT_S,
    )
    return str(built)


def _uv() -> str:
    found = sorted((CACHE / "tools").glob("uv-*/bin/uv"))
    if not found:
        raise AssertionError("no cached uv: run `make venv` first")
    return str(found[-1])
