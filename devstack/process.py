"""A background service process remembered by a pid file, started once and stopped cleanly."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


class ServiceError(RuntimeError):
    """A local service could not be built, started or stopped."""


@dataclass(frozen=True)
class ServiceProcess:
    """One service: its command line, its pid file and its log file, all under `home`."""

    name: str
    home: Path

    @property
    def pid_file(self) -> Path:
        return self.home / f"{self.name}.pid"

    @property
    def log_file(self) -> Path:
        return self.home / f"{self.name}.log"

    def pid(self) -> int | None:
        """The pid of the running service, or None (a stale pid file is removed)."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        if _alive(pid):
            return pid
        self.pid_file.unlink(missing_ok=True)
        return None

    def spawn(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> int:
        """Start the command detached from our session, so it outlives `make up`."""
        self.home.mkdir(parents=True, exist_ok=True)
        # posix_spawn rather than Popen: nothing in this process owns the child afterwards.
        pid = os.posix_spawnp(
            argv[0],
            list(argv),
            {**os.environ, **(env or {})},
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (
                    os.POSIX_SPAWN_OPEN,
                    1,
                    str(self.log_file),
                    os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                    0o644,
                ),
                (os.POSIX_SPAWN_DUP2, 1, 2),
            ],
            setsid=True,
        )
        self.pid_file.write_text(str(pid))
        return pid

    def wait_ready(self, ready: Callable[[], bool], timeout_s: float) -> None:
        """Poll `ready` until it holds; fail early with the log's tail if the process died."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if ready():
                return
            if self.pid() is None:
                raise ServiceError(f"{self.name} exited during start-up:\n{self.log_tail()}")
            time.sleep(0.25)
        raise ServiceError(f"{self.name} not ready after {timeout_s:.0f}s:\n{self.log_tail()}")

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM, wait for a clean exit, SIGKILL only past the timeout."""
        pid = self.pid()
        if pid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        self.pid_file.unlink(missing_ok=True)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"


def _alive(pid: int) -> bool:
    """Whether the pid is a running process: a zombie (exited, not reaped) is dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie of ours is reaped here; one whose parent never reaps it (a service orphaned
    # to a PID 1 that reaps nothing, as in many containers) still answers kill(0) for good.
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    return _state(pid) not in ("Z", "X", None)


def _state(pid: int) -> str | None:
    """The process state letter of /proc/<pid>/stat (R, S, Z, ...); "" where /proc is not
    mounted, None when the process is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None if Path("/proc/self/stat").exists() else ""
    except OSError:
        return ""
    # The command name in parentheses may hold spaces and parentheses: split after the last.
    return stat.rpartition(")")[2].split()[0]


def listening_pids(port: int) -> set[int]:
    """The pids (of those we may inspect) holding a TCP socket listening on `port`.

    Read from /proc/net/tcp{,6} and each process's fds; empty where /proc is not mounted.
    """
    sockets = {f"socket:[{inode}]" for inode in _listening_inodes(port)}
    pids: set[int] = set()
    for entry in Path("/proc").glob("[0-9]*") if sockets else ():
        if sockets & _links(entry / "fd"):
            pids.add(int(entry.name))
    return pids


def _links(fds: Path) -> set[str]:
    """What each of a process's fds names, of those still open as they are read: one closed
    meanwhile (by another thread) must not hide the others."""
    links: set[str] = set()
    with contextlib.suppress(OSError):  # the process ended, or is not ours to inspect
        for fd in fds.iterdir():
            with contextlib.suppress(OSError):
                links.add(os.readlink(fd))
    return links


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()  # sl local rem st ... inode (st 0A is LISTEN)
                if fields[3] == "0A" and int(fields[1].rpartition(":")[2], 16) == port:
                    inodes.add(fields[9])
    return inodes


def port_open(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
        return True
    return False


# Ports handed out below the kernel's ephemeral range: a port the kernel picked for `bind(0)`
# and then let go of is the next `bind(0)`'s to take (an ops listener on port 0, a client's own
# end of a connection), so a port from there could be taken before its service listens on it.
_LOWEST_PORT = 10000
_handed_out: set[int] = set()


def free_port() -> int:
    """A port nothing on 127.0.0.1 listens on, never one handed out before by this process,
    below the ephemeral range so that no port-0 listener or outgoing connection takes it first."""
    floor = _ephemeral_floor()
    for _ in range(1000):
        port = random.randrange(_LOWEST_PORT, floor)
        if port in _handed_out:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise ServiceError(f"no free port between {_LOWEST_PORT} and {floor}")


def _ephemeral_floor() -> int:
    """The lowest port the kernel hands to `bind(0)` (Linux; 32768 where it cannot be read)."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768
    return max(low, _LOWEST_PORT + 1000)


def run_checked(argv: Sequence[str], what: str, env: Mapping[str, str] | None = None) -> None:
    """Run a build or fetch step to completion; on failure, say what failed and show its output."""
    result = subprocess.run(
        list(argv),
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
    )
    if result.returncode != 0:
        raise ServiceError(f"{what} failed ({result.returncode}):\n{result.stdout}{result.stderr}")
