"""The release before the newest record format level, built from this repository's history:
its own git worktree and venv (uv, from the cache `make deps` fills), made once and kept
under ~/.cache/durable-kafka, so a rolling upgrade can start instances of it beside this head.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

# The last commit that writes StreamMeta 0x05 and BucketMeta 0x01 (`PREVIOUS_LEVEL`): the one
# before 0x06 and 0x02 came (`git log --first-parent -S'x06' -- adapter/state/records.py`).
COMMIT = "0a568fa"
REPO = Path(__file__).resolve().parents[2]
CACHE = Path.home() / ".cache" / "durable-kafka"
HOME = CACHE / "releases" / f"format-5-{COMMIT}"
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
