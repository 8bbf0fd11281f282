"""`serve --workers N`: N serving processes on one port, and the parent that keeps them running.

Each worker is a whole adapter (its own catalog, live readers, Kafka clients) and a member of
the owners' group under an instance id of its own (`<instance id>.w<index>`), so the group
shares the write slots among the workers as among instances. They share the main listener
through `SO_REUSEPORT` (the kernel spreads connections over them); each also listens on a port
of its own (the `listen` host, a port the parent picked), which it advertises as its URL for
forwarded writes, and on a Unix socket, over which its siblings forward to it instead (cheaper:
docs/performance.md). The parent binds those, so that a restarted worker serves again under
the very same URL (which static membership needs) and connections wait in their backlog
meanwhile.

The parent serves nothing. It restarts a worker that dies (a second later; it gives up, and
exits 1, when one dies 5 times within a minute), passes SIGTERM and SIGINT on to every worker
(each drains as a single process does) and exits once all have: 0, or 1 if one failed, or 2 on
a configuration error. Workers end with it even when it is killed (`PR_SET_PDEATHSIG`).
With HTTPS it passes SIGHUP on to every worker too, and each reloads its certificate: an
operator (or an orchestrator) signals the one process it knows, the parent.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from urllib.parse import urlsplit

from adapter.config import Settings

log = logging.getLogger("durable-kafka.workers")

RESTART_DELAY_S = 1.0
CRASH_WINDOW_S = 60.0
CRASHES_TOLERATED = 5
CONFIG_ERROR = 2  # a worker's exit status for a setting it cannot use: restarting cannot help
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Listeners:
    """What one serving process listens on besides `listen`."""

    reuse_port: bool = False  # share `listen` with sibling workers
    forward: socket.socket | None = None  # its own TCP port: its advertised URL
    unix: socket.socket | None = None  # its own Unix socket: where siblings forward
    # Where each sibling's advertised URL is reached on this machine (its Unix socket).
    siblings: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Worker:
    """One worker's settings and listeners, fixed for the parent's lifetime."""

    index: int
    settings: Settings
    listeners: Listeners


Serve = Callable[[Settings, Listeners], int]


def worker_instance_id(settings: Settings, index: int) -> str:
    """A static group member id per worker, stable across restarts of the worker and of the
    whole instance (the base id comes from `instance_id` or the shared listener's URL)."""
    suffix = f".w{index}"
    return settings.group_instance_id[: 249 - len(suffix)] + suffix


def worker_url(settings: Settings, port: int) -> str:
    """The instance's advertised URL with the worker's own port."""
    parts = urlsplit(settings.advertised_url)
    host = parts.hostname or settings.host
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}:{port}"


def ops_listen(settings: Settings, index: int) -> str:
    """Worker `index`'s ops listener: the configured port plus the index (0 stays 0: any port;
    empty stays empty: none), so that each worker's metrics are scraped on a port of its own."""
    address = settings.ops_address
    if address is None or address[1] == 0:
        return settings.ops_listen
    host, port = address
    host = f"[{host}]" if ":" in host else host
    return f"{host}:{port + index}"


def plan(settings: Settings, sockets_dir: Path) -> list[Worker]:
    """Bind every worker's own listeners (kept open by the parent) and derive its settings."""
    count = settings.worker_count
    forwards = [_tcp_listener(settings.host) for _ in range(count)]
    unixes = [_unix_listener(sockets_dir / f"worker-{index}.sock") for index in range(count)]
    urls = [worker_url(settings, sock.getsockname()[1]) for sock in forwards]
    paths = {url: str(sockets_dir / f"worker-{index}.sock") for index, url in enumerate(urls)}
    return [
        Worker(
            index,
            replace(
                settings,
                workers=1,
                advertise_url=urls[index],
                instance_id=worker_instance_id(settings, index),
                ops_listen=ops_listen(settings, index),
            ),
            Listeners(
                reuse_port=True,
                forward=forwards[index],
                unix=unixes[index],
                siblings={url: path for url, path in paths.items() if url != urls[index]},
            ),
        )
        for index in range(count)
    ]


def _tcp_listener(host: str) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, 0), family=family, backlog=1024)


def _unix_listener(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.listen(1024)
    return sock


@dataclass
class _Running:
    worker: Worker
    process: multiprocessing.process.BaseProcess | None = None
    started: float = 0.0
    restart_at: float | None = None
    crashes: list[float] = field(default_factory=list)


class WorkerPool:
    """The parent: starts the workers, restarts the dead, stops them all when asked."""

    def __init__(self, settings: Settings, serve: Serve) -> None:
        self.settings = settings
        self.serve = serve
        self.context = multiprocessing.get_context("fork")  # no thread runs in the parent
        self.stopping = False
        self.status = 0
        self.running: list[_Running] = []

    def run(self) -> int:
        with tempfile.TemporaryDirectory(prefix="durable-kafka-") as sockets_dir:
            workers = plan(self.settings, Path(sockets_dir))
            self.running = [_Running(worker) for worker in workers]
            log.info(
                "serving on %s://%s with %d workers: %s",
                self.settings.scheme,
                self.settings.listen,
                len(workers),
                ", ".join(w.settings.advertised_url for w in workers),
            )
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, self._stop)
            if self.settings.tls:
                signal.signal(signal.SIGHUP, self._pass_on)
            try:
                for entry in self.running:
                    self._start(entry)
                while not self.stopping:
                    self._watch()
            finally:
                self._stop_all()
                _close_all(workers)
        return self.status

    def _stop(self, signum: int, _frame: FrameType | None) -> None:
        log.info("stopping: %s to every worker", signal.Signals(signum).name)
        self.stopping = True

    def _pass_on(self, signum: int, _frame: FrameType | None) -> None:
        """SIGHUP: every running worker reloads its TLS certificate."""
        log.info("%s: passed on to every worker", signal.Signals(signum).name)
        for entry in self.running:
            if entry.process is not None and entry.process.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(entry.process.pid, signum)

    def _start(self, entry: _Running) -> None:
        parent = os.getpid()
        process = self.context.Process(
            target=_worker_main,
            args=(self.serve, entry.worker, [r.worker for r in self.running], parent),
            name=f"durable-kafka-worker-{entry.worker.index}",
        )
        process.start()
        entry.process, entry.started, entry.restart_at = process, time.monotonic(), None
        log.info("worker %d started (pid %s)", entry.worker.index, process.pid)

    def _watch(self) -> None:
        alive = [e.process.sentinel for e in self.running if e.process is not None]
        multiprocessing.connection.wait(alive, timeout=0.5)
        now = time.monotonic()
        for entry in self.running:
            if entry.process is not None and not entry.process.is_alive():
                self._died(entry, now)
            if entry.restart_at is not None and now >= entry.restart_at and not self.stopping:
                self._start(entry)

    def _died(self, entry: _Running, now: float) -> None:
        assert entry.process is not None
        code, entry.process = entry.process.exitcode, None
        if self.stopping:
            return
        entry.crashes = [t for t in entry.crashes if now - t < CRASH_WINDOW_S] + [now]
        if code == CONFIG_ERROR or len(entry.crashes) > CRASHES_TOLERATED:
            why = "a configuration error" if code == CONFIG_ERROR else "too many restarts"
            log.error("worker %d exited (%s): %s; stopping", entry.worker.index, code, why)
            self.status, self.stopping = (CONFIG_ERROR if code == CONFIG_ERROR else 1), True
            return
        log.warning("worker %d exited (%s); restarting it", entry.worker.index, code)
        entry.restart_at = now + RESTART_DELAY_S

    def _stop_all(self) -> None:
        """SIGTERM every worker; each drains; SIGKILL whoever outlives its drain by far.

        No worker is restarted any more, so the parent lets go of the workers' own listeners at
        once: each closes with its worker's (after its hand-over), and a sibling or another
        instance forwarding there from then on is refused and answered 503 at once, instead of
        waiting in a backlog nobody accepts from until its own drain runs out."""
        processes = [e.process for e in self.running if e.process is not None]
        for process in processes:
            if process.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGTERM)
        _close_all([entry.worker for entry in self.running])
        signalled = time.monotonic()
        deadline = (
            signalled + self.settings.drain_timeout_ms / 1000 + 3 * self.settings.kafka_timeout_s
        )
        for process in processes:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                log.error("worker pid %s did not stop in time: killed", process.pid)
                process.kill()
                process.join()
                continue
            after_s = time.monotonic() - signalled
            log.info("worker pid %s ended %.1f s after SIGTERM", process.pid, after_s)
            if process.exitcode not in (0, -signal.SIGTERM) and self.status == 0:
                self.status = 1


def _worker_main(serve: Serve, worker: Worker, every: list[Worker], parent: int) -> None:
    """A worker process: die with the parent, drop the other workers' sockets, serve."""
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the line above
        sys.exit(1)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)  # serving installs its own
    # Not the parent's handler (it signals the workers); serving installs its own, and until
    # then the certificate it is about to load is the current one anyway.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    _close_all([other for other in every if other.index != worker.index])
    _label_logs(worker.index)
    sys.exit(serve(worker.settings, worker.listeners))


def _close_all(workers: list[Worker]) -> None:
    for worker in workers:
        for sock in (worker.listeners.forward, worker.listeners.unix):
            if sock is not None:
                sock.close()


def _label_logs(index: int) -> None:
    """Every log line of a worker says which (`worker` in JSON lines)."""

    def label(record: logging.LogRecord) -> bool:
        record.worker = index
        return True

    for handler in logging.getLogger().handlers:
        handler.addFilter(label)
