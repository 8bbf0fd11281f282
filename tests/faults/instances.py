"""Adapter processes the suite can start, kill -9, pause (SIGSTOP), resume and restart."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from devstack.process import free_port
from tests.adapter_process import OPS_ANY_PORT, SCRIPT, WORKERS, http_status

READY_TIMEOUT_S = 90.0


@dataclass
class Instance:
    name: str
    env: dict[str, str]
    log: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        argv = [SCRIPT, "serve", "--listen", f"127.0.0.1:{self.port}", *OPS_ANY_PORT, *WORKERS]
        with self.log.open("ab") as sink:
            catalog = {"DURABLE_KAFKA_CATALOG_DIR": str(self.log.parent / "catalog")}
            self.proc = subprocess.Popen(argv, env=os.environ | catalog | self.env, stderr=sink)

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited:\n{self.log.read_text()[-3000:]}")
            if http_status(f"{self.base}/readyz") == 200:
                return
            time.sleep(0.2)
        raise AssertionError(f"{self.name} not ready:\n{self.log.read_text()[-3000:]}")

    def kill9(self) -> None:
        self._signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(timeout=30)

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
            self.proc.kill()
            self.proc.wait(timeout=30)

    def _signal(self, sig: signal.Signals) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
