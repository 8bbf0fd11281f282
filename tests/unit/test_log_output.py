"""The repeat limit on warnings and errors (`adapter/log_output.py`)."""

from __future__ import annotations

import logging

from adapter.log_output import RepeatLimit


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _record(message: str, level: int = logging.ERROR, name: str = "x") -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, message, None, None)


def test_a_burst_of_one_kind_passes_and_the_rest_is_dropped() -> None:
    limit = RepeatLimit(burst=3, window_s=10, clock=Clock())
    passed = [limit.filter(_record("accept failed: %s")) for _ in range(100)]
    assert passed == [True] * 3 + [False] * 97


def test_kinds_are_limited_apart_and_info_never() -> None:
    limit = RepeatLimit(burst=1, window_s=10, clock=Clock())
    assert limit.filter(_record("a"))
    assert limit.filter(_record("b"))
    assert limit.filter(_record("a", name="y"))
    assert limit.filter(_record("a", level=logging.WARNING))
    assert not limit.filter(_record("a"))
    assert all(limit.filter(_record("a", level=logging.INFO)) for _ in range(50))


def test_the_next_window_says_how_many_were_dropped() -> None:
    clock = Clock()
    limit = RepeatLimit(burst=2, window_s=10, clock=clock)
    for _ in range(7):
        limit.filter(_record("boom %d"))
    clock.now = 10.0
    record = _record("boom %d")
    assert limit.filter(record)
    assert record.__dict__["suppressed"] == 5
    assert "5 more like this suppressed" in str(record.msg)
