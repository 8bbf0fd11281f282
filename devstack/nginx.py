"""Debian's nginx, for the shared-cache tests: a real caching proxy (`proxy_cache`) that a test
runs with a config of its own on a free port; the system's nginx service is never used."""

from __future__ import annotations

import subprocess
from pathlib import Path

from devstack.debian import installed

NGINX = Path("/usr/sbin/nginx")


def nginx_path() -> str:
    """`/usr/sbin/nginx` (package `nginx-light`), installed with apt-get on first use as root."""
    return installed(NGINX, "nginx-light")


def nginx_version() -> str | None:
    """`nginx version: nginx/1.x` when it is installed and runs, else None."""
    if not NGINX.exists():
        return None
    result = subprocess.run(
        [str(NGINX), "-v"], capture_output=True, text=True, check=False, timeout=30
    )
    version = result.stderr.strip()  # nginx prints its version on stderr
    return version if result.returncode == 0 and version else None
