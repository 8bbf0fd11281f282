"""Debian's Chromium, for the browser tests; Playwright drives it, it never downloads a browser."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from devstack.process import ServiceError, run_checked

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
# Another apt-get (an unattended upgrade, a second checkout's `make deps`) may hold the lock.
APT_LOCK_WAIT_S = 600


def chromium_path() -> str:
    """`/usr/bin/chromium`, installed with apt-get on first use when we are root."""
    if CHROMIUM.exists():
        return str(CHROMIUM)
    if shutil.which("apt-get") is None:
        raise ServiceError(f"{CHROMIUM} is missing and there is no apt-get to install it")
    if os.geteuid() != 0:
        raise ServiceError(f"{CHROMIUM} is missing; install it as root: apt-get install chromium")
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    apt = ["apt-get", "-o", f"DPkg::Lock::Timeout={APT_LOCK_WAIT_S}"]
    run_checked([*apt, "update"], "apt-get update", env=env)
    run_checked(
        [*apt, "install", "-y", "--no-install-recommends", "chromium"],
        "installing chromium with apt-get",
        env=env,
    )
    if not CHROMIUM.exists():
        raise ServiceError(f"apt-get installed chromium but {CHROMIUM} is still missing")
    return str(CHROMIUM)


def chromium_version() -> str | None:
    """`Chromium 1xx.…` when it is installed and runs, else None."""
    if not CHROMIUM.exists():
        return None
    result = subprocess.run(
        [str(CHROMIUM), "--version"], capture_output=True, text=True, check=False, timeout=30
    )
    version = result.stdout.strip()
    return version if result.returncode == 0 and version else None
