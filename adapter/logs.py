"""How the process logs: one JSON object a line (`log_format = "json"`) or text, to stderr.

A JSON line has `time`, `level`, `logger` and `message`, an `exc_info` traceback when there
is one, and the fields its call passed in `extra` (the request log's, `adapter/http/observe.py`).
"""

from __future__ import annotations

import logging

from pythonjsonlogger.json import JsonFormatter

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def setup(level: str, log_format: str) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(formatter(log_format))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)


def formatter(log_format: str) -> logging.Formatter:
    if log_format == "text":
        return logging.Formatter(TEXT_FORMAT)
    return JsonFormatter(
        "%(asctime)s %(levelname)s %(name)s %(message)s",
        rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
        timestamp=False,
    )
