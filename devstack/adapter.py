"""The adapter itself as a background service, for `make up` / `make down`."""

from __future__ import annotations

import sys
import urllib.error
import urllib.request
from pathlib import Path

from devstack.process import ServiceProcess

START_TIMEOUT_S = 60.0


def is_ready(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/readyz", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def start(home: Path, base_url: str, bootstrap_servers: str) -> str:
    """Serve the adapter in the background on the embedded defaults; return its URL once ready."""
    listen = base_url.removeprefix("http://")
    process = ServiceProcess("adapter", home)
    if process.pid() is None:
        script = Path(sys.executable).with_name("durable-kafka")
        argv = [str(script), "serve", "--listen", listen, "--bootstrap-servers", bootstrap_servers]
        process.spawn(argv)
    process.wait_ready(lambda: is_ready(base_url), START_TIMEOUT_S)
    return base_url


def stop(home: Path) -> None:
    ServiceProcess("adapter", home).stop()
