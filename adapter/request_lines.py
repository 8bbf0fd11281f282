"""The request log's writer: each request's line queued on the event loop, formatted and written
to the log's stream by a thread, many lines a write.

One line a request, through `logging`, cost a busy server 14-24 % of its appends: a
`LogRecord`, python-json-logger's formatting and a write per request, all on the event loop.
Here the loop only appends the line's time and fields to a bounded queue; a thread wakes every
`FLUSH_EVERY_S`, formats the lines with the standard library's C JSON encoder (the very line
`adapter/log_output.py`'s formatter makes, time, level, logger and message first) and writes them
at once, holding the log handler's lock so no other line is cut in two. Formatting still
takes the process's interpreter lock; what is saved is the per-request record, the
general-purpose formatter and the per-line write.

The loop never waits for the writer: a line that finds `limit` lines waiting is dropped and
counted, the count logged as a warning once the writer catches up. An error line (status >=
400) is kept past that, up to `ERROR_LIMIT_FACTOR` times `limit` (a bound on memory all the
same). `install` puts it in place of `logging` for `durable_kafka.requests` in a serving
process; without it (in tests, in tools) the lines go through `logging` as before.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import threading
import time
from collections import deque
from typing import Any, Final, TextIO

LOGGER: Final = "durable_kafka.requests"
FLUSH_EVERY_S: Final = 0.05
# Lines waiting at most: at thousands of requests a second, seconds of a stalled stream.
QUEUE_LINES: Final = 16_384
ERROR_LIMIT_FACTOR: Final = 4

log = logging.getLogger(__name__)
_encode = json.JSONEncoder(default=str).encode


class LineFormat:
    """A request line as `adapter/log_output.py`'s formatter writes it (JSON, or text), with the
    time as `logging` renders `asctime`; the local time of one second is formatted once."""

    def __init__(self, json_lines: bool) -> None:
        self.json_lines = json_lines
        self._second = -1
        self._second_text = ""

    def __call__(self, created: float, fields: dict[str, object]) -> str:
        message = f"{fields['method']} {fields['route']} {fields['status']}"
        when = self.asctime(created)
        if not self.json_lines:
            return f"{when} INFO {LOGGER}: {message}"
        head = {"time": when, "level": "INFO", "logger": LOGGER, "message": message}
        return _encode(head | fields)

    def asctime(self, created: float) -> str:
        second = int(created)
        if second != self._second:
            self._second = second
            self._second_text = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(second))
        return f"{self._second_text},{int((created - second) * 1000):03d}"


class RequestLines:
    """Request lines waiting for the writer thread, and the thread (started at the first line,
    in the process that logs it: a worker forked from a parent without it starts its own)."""

    def __init__(
        self,
        stream: TextIO,
        lock: contextlib.AbstractContextManager[Any],
        line: LineFormat,
        limit: int = QUEUE_LINES,
        every_s: float = FLUSH_EVERY_S,
    ) -> None:
        self.stream, self.lock, self.line = stream, lock, line
        self.limit, self.every_s = limit, every_s
        self.dropped = 0  # lines dropped since the last warning about them
        self._waiting: deque[tuple[float, dict[str, object]]] = deque()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def put(self, fields: dict[str, object], error: bool) -> None:
        """Queue one line (on the event loop: an append, never a wait)."""
        waiting = len(self._waiting)
        if waiting >= self.limit and (not error or waiting >= self.limit * ERROR_LIMIT_FACTOR):
            self.dropped += 1
            return
        self._waiting.append((time.time(), fields))
        if self._thread is None:
            self._start()

    def flush(self) -> None:
        """Format and write every line waiting now (the writer thread, or at exit)."""
        batch: list[str] = []
        waiting = self._waiting
        while waiting:  # deque.popleft is atomic: the loop appends meanwhile
            created, fields = waiting.popleft()
            batch.append(self.line(created, fields))
        if batch:
            with self.lock:
                self.stream.write("\n".join(batch) + "\n")
                self.stream.flush()
        self._report_dropped()

    def _report_dropped(self) -> None:
        dropped, self.dropped = self.dropped, 0
        if dropped:
            log.warning(
                "dropped %d request log lines: the log's stream did not keep up",
                dropped,
                extra={"dropped": dropped},
            )

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="request-log", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.flush()
            except (OSError, ValueError):  # stderr closed or broken: nothing to log to
                self._waiting.clear()

    def close(self) -> None:
        """Stop the thread and write what is left."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1)
        self.flush()

    def forget_thread(self) -> None:
        """In a forked child: the parent's thread is not there, nor are its lines to write."""
        self._thread, self._stop = None, threading.Event()
        self._waiting.clear()


class _Installed:
    lines: RequestLines | None = None


installed = _Installed()


def install(handler: logging.StreamHandler[TextIO], json_lines: bool) -> RequestLines:
    """Write request lines to `handler`'s stream from now on, under its lock."""
    lock = handler.lock if handler.lock is not None else threading.RLock()
    lines = RequestLines(handler.stream, lock, LineFormat(json_lines))
    installed.lines = lines
    return lines


def close() -> None:
    """Write the lines still waiting, if request lines are written here at all."""
    if installed.lines is not None:
        installed.lines.close()


def _after_fork() -> None:
    if installed.lines is not None:
        installed.lines.forget_thread()


os.register_at_fork(after_in_child=_after_fork)
