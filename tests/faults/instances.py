"""Adapter processes the suite can start, kill -9, pause (SIGSTOP), resume and restart.

An instance may run `serve --workers N`: a parent and N workers, in a process group of their
own, so that killing or pausing the instance signals every one of its processes at once (as a
machine failing or stalling would), while `kill_worker` kills a single worker (its parent
restarts it)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from devstack.process import free_port
from tests.adapter_process import (
    OPS_ANY_PORT,
    SCRIPT,
    WORKERS,
    http_status,
    program,
    worker_urls,
)

READY_TIMEOUT_S = 90.0
_STARTED = re.compile(rb"worker (\d+) started \(pid (\d+)\)")
_OPS = re.compile(rb"ops listener on (http://127\.0\.0\.1:\d+)")


def compiled(home: Path) -> dict[str, str]:
    """Run from compiled bytecode, as the image does (`UV_COMPILE_BYTECODE`): the sources are
    compiled once, into `home`'s own cache. Where `PYTHONDONTWRITEBYTECODE` is set (this
    suite's machines) every start compiled them all again, seconds of CPU that an instance
    started beside three starting brokers waited for: no part of the product's own start."""
    return {"PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": str(home / "bytecode")}


@dataclass
class Instance:
    name: str
    env: dict[str, str]
    log: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    workers: int = int(WORKERS[1])
    script: str = SCRIPT  # another build's `durable-kafka` (a rolling upgrade's older release)
    started_at: int = 0  # where the log stood when the latest start began

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def serving(self) -> bool:
        """Whether the latest start logged that it listens on `base`. Until then what answers
        there may be another program: a port handed out at the scenario's start that some
        other test run of a shared machine took before this instance bound it (it then fails
        to bind, and exits)."""
        with self.log.open("rb") as log:
            log.seek(self.started_at)
            return f"serving on {self.base} (".encode() in log.read()

    def start(self) -> None:
        argv = [*program(self.env, self.script), "serve", "--listen", f"127.0.0.1:{self.port}"]
        argv += OPS_ANY_PORT
        argv += ["--workers", str(self.workers)]
        self.started_at = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as sink:
            # Checkpoints every 2 s: a killed instance restarts from its catalog file (the
            # resume path under faults), not from a rebuild as before its first 30-s one.
            catalog = {
                "DURABLE_KAFKA_CATALOG_DIR": str(self.log.parent / "catalog"),
                "DURABLE_KAFKA_CATALOG_CHECKPOINT_MS": "2000",
            }
            env = os.environ | catalog | compiled(self.log.parent.parent) | self.env
            self.proc = subprocess.Popen(argv, env=env, stderr=sink, process_group=0)

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited:\n{self.log.read_text()[-3000:]}")
            if (
                self.serving()
                and http_status(f"{self.base}/readyz") == 200
                and all(http_status(f"{url}/readyz") == 200 for url in self.worker_urls())
                and self.proc.poll() is None
            ):
                return  # every worker (the shared port answers from any one of them)
            time.sleep(0.2)
        raise AssertionError(f"{self.name} not ready:\n{self.log.read_text()[-3000:]}")

    def ops_url(self) -> str:
        """The ops listener's URL of the latest start (a single process), from its log."""
        with self.log.open("rb") as log:
            log.seek(self.started_at)
            found = _OPS.findall(log.read())
        assert len(found) == 1, f"{self.name}: no single ops listener since its start: {found}"
        return str(found[0].decode())

    def exited(self) -> str | None:
        """How the instance ended if it is no longer running (its exit status and the end of
        its log), else None."""
        if self.proc is None or self.proc.poll() is None:
            return None
        tail = self.log.read_text(errors="replace")[-1500:]
        return f"{self.name} exited with status {self.proc.returncode}:\n{tail}"

    def worker_urls(self) -> list[str]:
        """Each worker's own URL (its advertised one), in worker order; just the shared
        `base` for a single process. From the log's latest start."""
        if self.workers == 1:
            return [self.base]
        urls = worker_urls(self.log)
        assert urls, f"{self.name} has not logged its workers' URLs"
        return urls

    def worker_pid(self, index: int) -> int:
        """The pid of worker `index` as last started (the log says each start)."""
        found = [int(pid) for i, pid in _STARTED.findall(self.log.read_bytes()) if int(i) == index]
        assert found, f"{self.name} has not logged worker {index}'s start"
        return found[-1]

    def kill9(self) -> None:
        """kill -9 of the whole instance: the parent and every worker."""
        self._signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(timeout=30)

    def kill_worker(self, index: int) -> None:
        """kill -9 of one worker; the parent restarts it."""
        os.kill(self.worker_pid(index), signal.SIGKILL)

    def pause(self) -> None:
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.resume()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def _signal(self, sig: signal.Signals) -> None:
        """`sig` to every process of the instance (its process group: the parent's pid)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
