"""The compiled SSE subscriber (bench/sse_sub, Go): built once, run as the benchmark's workers.

One Go process holds thousands of SSE connections for a fraction of the CPU the Python
workers need per delivery, so the client is not what limits the figures. It speaks the same
messages as a Python worker, as JSON lines on stdout, and takes the same commands on stdin;
`GoChannel` makes it look like a worker's pipe to `fanout_procs.Pipes`.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from bench import gobuild

SOURCE = Path(__file__).resolve().parent / "sse_sub"


def build() -> Path:
    return gobuild.build(SOURCE, "sse_sub")


class GoWorker:
    """One sse_sub process: the duck type of a `multiprocessing` worker and its pipe."""

    def __init__(self, binary: Path, name: str, urls: list[str], connect: int, expected: int):
        self.name = name
        with tempfile.NamedTemporaryFile("w", suffix=".urls", delete=False) as listing:
            listing.write("\n".join(urls) + "\n")
        self._listing = Path(listing.name)
        command = [str(binary), "-urls", listing.name, "-connect", str(connect)]
        command += ["-expected", str(expected)]
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.pid = self._process.pid
        self._buffer = b""

    # -- the pipe ------------------------------------------------------------------------

    def fileno(self) -> int:
        assert self._process.stdout is not None
        return self._process.stdout.fileno()

    def poll(self) -> bool:
        """A whole message is buffered already (`wait` on the fd would not see it)."""
        return b"\n" in self._buffer

    def recv(self) -> tuple[str, dict[str, Any]]:
        while b"\n" not in self._buffer:
            data = os.read(self.fileno(), 1 << 20)
            if not data:
                raise EOFError(f"{self.name} closed its output")
            self._buffer += data
        line, self._buffer = self._buffer.split(b"\n", 1)
        message = json.loads(line)
        return message["kind"], message["payload"]

    def send(self, command: str) -> None:
        assert self._process.stdin is not None
        try:
            self._process.stdin.write(command.encode() + b"\n")
            self._process.stdin.flush()
        except BrokenPipeError:
            pass  # it exited; its end shows up on the output

    def close(self) -> None:
        self._listing.unlink(missing_ok=True)

    # -- the process ---------------------------------------------------------------------

    def join(self, timeout: float | None = None) -> None:
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            return
        self.close()

    def is_alive(self) -> bool:
        return self._process.poll() is None

    def kill(self) -> None:
        self._process.kill()
