"""The adapter itself as a background service, for `make up` / `make down`."""

from __future__ import annotations

import sys
import urllib.error
import urllib.request
from pathlib import Path

from devstack.process import ServiceError, ServiceProcess, listening_pids, port_open

START_TIMEOUT_S = 60.0


def is_ready(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/readyz", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def start(home: Path, base_url: str, bootstrap_servers: str) -> str:
    """Serve the adapter in the background on the embedded defaults; return its URL once ready.

    The adapter of the pid file is reused only while it runs (a zombie left by `kill -9` is
    dead) and no other process holds its port; anything else on the port is an error.
    """
    listen = base_url.removeprefix("http://")
    host, _, port = listen.rpartition(":")
    process = ServiceProcess("adapter", home)
    pid, holders = process.pid(), listening_pids(int(port))
    if holders and pid not in holders | _parents(holders):  # with --workers, its workers listen
        raise ServiceError(_taken(listen, holders, pid))
    if pid is None:
        if port_open(host, int(port)):
            raise ServiceError(_taken(listen, holders, pid))
        script = Path(sys.executable).with_name("durable-kafka")
        argv = [str(script), "serve", "--listen", listen, "--bootstrap-servers", bootstrap_servers]
        process.spawn(argv)
    process.wait_ready(lambda: is_ready(base_url), START_TIMEOUT_S)
    return base_url


def _parents(pids: set[int]) -> set[int]:
    """The parent pid of each process in `pids` (those /proc still shows)."""
    parents = set()
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        parents.add(int(stat.rpartition(")")[2].split()[1]))
    return parents


def _taken(listen: str, holders: set[int], pid: int | None) -> str:
    by = f"pid {', '.join(map(str, sorted(holders)))}" if holders else "another process"
    ours = f"the adapter of its pid file is {pid}" if pid else "no adapter of ours runs"
    return f"{listen} is taken by {by} and {ours}: stop that process first"


def stop(home: Path) -> None:
    ServiceProcess("adapter", home).stop()
