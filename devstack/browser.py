"""Debian's Chromium, for the browser tests; Playwright drives it, it never downloads a browser."""

from __future__ import annotations

import subprocess
from pathlib import Path

from devstack.debian import installed

CHROMIUM = Path("/usr/bin/chromium")
# Quiet, sandbox-free headless start-up: no GPU, no update checks, no first-run or sync.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


def chromium_path() -> str:
    """`/usr/bin/chromium`, installed with apt-get on first use when we are root."""
    return installed(CHROMIUM, "chromium")


def chromium_version() -> str | None:
    """`Chromium 1xx.…` when it is installed and runs, else None."""
    if not CHROMIUM.exists():
        return None
    result = subprocess.run(
        [str(CHROMIUM), "--version"], capture_output=True, text=True, check=False, timeout=30
    )
    version = result.stdout.strip()
    return version if result.returncode == 0 and version else None
