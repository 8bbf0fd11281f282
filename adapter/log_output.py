"""How the process logs: one JSON object a line (`log_format = "json"`) or text, to stderr.

A JSON line has `time`, `level`, `logger` and `message`, an `exc_info` traceback when there
is one, and the fields its call passed in `extra`. The request log's lines
(`adapter/http/observe.py`) are the same, written by `adapter/request_lines.py` off the loop.
Warnings and errors that repeat are rate-limited (`RepeatLimit`): a flood of one failure must
not fill the disk or starve the event loop (asyncio alone once logged 142,079 tracebacks in
25 s for descriptors run out).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from pythonjsonlogger.json import JsonFormatter

from adapter import request_lines

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


# At most REPEAT_BURST records of one kind per REPEAT_WINDOW_S seconds.
REPEAT_BURST = 10
REPEAT_WINDOW_S = 10.0
# Kinds remembered at once; past it they are forgotten (and each may log a burst again).
MAX_KINDS = 1000


@dataclass
class _Window:
    start: float
    count: int = 0
    dropped: int = 0


class RepeatLimit(logging.Filter):
    """Lets through at most `burst` warnings or errors of one kind (logger, level and message
    template) per `window_s`; the first let through after some were dropped carries their
    count in `suppressed` (and says so in its message)."""

    def __init__(
        self,
        burst: int = REPEAT_BURST,
        window_s: float = REPEAT_WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.burst, self.window_s, self.clock = burst, window_s, clock
        self._windows: dict[tuple[str, int, str], _Window] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        key = (record.name, record.levelno, str(record.msg))
        now = self.clock()
        window = self._windows.get(key)
        if window is None or now - window.start >= self.window_s:
            self._new_window(key, now, record, window.dropped if window else 0)
            return True
        window.count += 1
        if window.count <= self.burst:
            return True
        window.dropped += 1
        return False

    def _new_window(
        self, key: tuple[str, int, str], now: float, record: logging.LogRecord, dropped: int
    ) -> None:
        if len(self._windows) >= MAX_KINDS:
            self._windows.clear()
        self._windows[key] = _Window(now, count=1)
        if dropped:
            record.suppressed = dropped
            record.msg = f"{record.msg} [{dropped} more like this suppressed]"


def setup(level: str, log_format: str) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(formatter(log_format))
    handler.addFilter(RepeatLimit())
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    request_lines.install(handler, json_lines=log_format == "json")


def formatter(log_format: str) -> logging.Formatter:
    if log_format == "text":
        return logging.Formatter(TEXT_FORMAT)
    return JsonFormatter(
        "%(asctime)s %(levelname)s %(name)s %(message)s",
        rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
        timestamp=False,
    )
