"""Tools from Debian's packages, installed with apt-get on first use (as root), never fetched."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from devstack.process import ServiceError, run_checked

# Another apt-get (an unattended upgrade, a second checkout's `make deps`) may hold the lock.
APT_LOCK_WAIT_S = 600


def installed(binary: Path, package: str) -> str:
    """`binary`, installing `package` with apt-get first when it is missing and we are root.
    A package's services are not started by this (a container's policy-rc.d, or none)."""
    if binary.exists():
        return str(binary)
    if shutil.which("apt-get") is None:
        raise ServiceError(f"{binary} is missing and there is no apt-get to install it")
    if os.geteuid() != 0:
        raise ServiceError(f"{binary} is missing; install it as root: apt-get install {package}")
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    apt = ["apt-get", "-o", f"DPkg::Lock::Timeout={APT_LOCK_WAIT_S}"]
    run_checked([*apt, "update"], "apt-get update", env=env)
    run_checked(
        [*apt, "install", "-y", "--no-install-recommends", package],
        f"installing {package} with apt-get",
        env=env,
    )
    if not binary.exists():
        raise ServiceError(f"apt-get installed {package} but {binary} is still missing")
    return str(binary)
