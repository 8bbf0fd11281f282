"""The SSE fan-out benchmark's processes: pipes to the workers, spawning, reaping, /proc figures."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any, Protocol

from bench import targets
from bench.fanout_stats import Row

_MP = multiprocessing.get_context("spawn")


class BenchError(RuntimeError):
    """The scenario could not be measured (a worker died, subscribers never connected...)."""


class Channel(Protocol):
    """A worker's pipe: a `multiprocessing` connection, or a Go worker's stdin and stdout."""

    def fileno(self) -> int: ...
    def poll(self) -> bool: ...
    def recv(self) -> Any: ...
    def send(self, obj: Any) -> None: ...
    def close(self) -> None: ...


class Proc(Protocol):
    """A worker or appender process: `multiprocessing`'s, or a Go worker."""

    @property
    def name(self) -> str: ...
    @property
    def pid(self) -> int | None: ...
    def join(self, timeout: float | None = None) -> None: ...
    def is_alive(self) -> bool: ...
    def kill(self) -> None: ...


class Pipes:
    """The orchestrator's end of every worker's and the appender's pipe."""

    def __init__(self) -> None:
        self.names: dict[Channel, str] = {}
        self.status: dict[str, dict[str, int]] = {}
        self.results: dict[str, dict[str, Any]] = {}
        self.on_phase: Callable[[str], None] = lambda _phase: None

    def add(self, name: str, conn: Channel) -> None:
        self.names[conn] = name

    def pump(self, timeout_s: float) -> None:
        """Take every message that arrives within `timeout_s`."""
        by_fd = {conn.fileno(): conn for conn in self.names}
        for fd in wait(list(by_fd), timeout_s):
            assert isinstance(fd, int)
            self._take(by_fd[fd])

    def _take(self, conn: Channel) -> None:
        """Every message the channel has ready (a Go worker's may be buffered already)."""
        name = self.names[conn]
        while True:
            try:
                kind, payload = conn.recv()
            except (EOFError, OSError):
                del self.names[conn]
                if name not in self.results:
                    raise BenchError(f"{name} died without a result") from None
                return
            if kind == "status":
                self.status[name] = payload
            elif kind == "phase":
                self.on_phase(payload)
            else:
                self.results[name] = payload
            if not conn.poll():
                return

    def total(self, key: str) -> int:
        return sum(status.get(key, 0) for status in self.status.values())

    def send(self, names: list[str], command: str) -> None:
        for conn, name in self.names.items():
            if name in names:
                conn.send(command)


def spawn(
    pipes: Pipes, name: str, target: Callable[[Any, Connection], None], spec: object
) -> BaseProcess:
    mine, theirs = _MP.Pipe()
    process = _MP.Process(target=target, args=(spec, theirs), name=name, daemon=True)
    process.start()
    theirs.close()
    pipes.add(name, mine)
    return process


def reap(processes: list[Proc]) -> None:
    for process in processes:
        process.join(5)
        if process.is_alive():
            process.kill()
            process.join()


class PeakSampler(threading.Thread):
    """The highest VmRSS of one process, sampled every 100 ms."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak_kib = targets.rss_kib(pid)
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(0.1):
            self.peak_kib = max(self.peak_kib, targets.rss_kib(self.pid))

    def finish(self) -> int:
        self._done.set()
        self.join()
        return self.peak_kib


@dataclass
class CpuSnapshot:
    at: float
    server: float
    workers: list[float]
    appender: float
    machine: tuple[int, int]

    @classmethod
    def take(cls, server: int, workers: list[int], appender: int) -> CpuSnapshot:
        return cls(
            time.monotonic(),
            targets.cpu_seconds(server),
            [targets.cpu_seconds(pid) for pid in workers],
            targets.cpu_seconds(appender),
            targets.machine_jiffies(),
        )


def record_cpu(row: Row, start: CpuSnapshot, end: CpuSnapshot) -> None:
    wall, cores = max(1e-9, end.at - start.at), os.cpu_count() or 1
    workers = [b - a for a, b in zip(start.workers, end.workers, strict=True)]
    row.server_cpu = (end.server - start.server) / wall / cores
    row.loadgen_cpu = (sum(workers) + end.appender - start.appender) / wall / cores
    row.busiest_worker_core = max(workers, default=0.0) / wall
    busy, total = (e - s for s, e in zip(start.machine, end.machine, strict=True))
    row.machine_cpu = busy / max(1, total)
