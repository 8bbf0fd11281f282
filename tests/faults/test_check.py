"""The checker is shown to fail: a clean history passes, and each doctored one is reported."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.faults.check import KINDS, check
from tests.faults.history import History, LogRecord, Outcome, Producer, Read, View, Write


def clean() -> tuple[History, list[LogRecord]]:
    """Producer p writes seq 0..2 to s (seq 1 retried after a timeout), a plain append and a
    rejected one, a close; a long-poll read what was there."""
    history = History()
    log = [LogRecord("s", 0, None, "create")]
    for seq in range(3):
        stamp = Producer("p", 0, seq)
        if seq == 1:
            history.writes.append(Write("s", "p1", 1.0, 2.0, Outcome.TIMEOUT, 0, stamp))
        history.writes.append(Write("s", f"p{seq}", 2.0 + seq, 2.5 + seq, Outcome.ACK, 200, stamp))
        log.append(LogRecord("s", 1 + seq, f"p{seq}", producer=stamp))
    history.writes.append(Write("s", "x", 6.0, 6.1, Outcome.ACK, 204))
    history.writes.append(Write("s", "y", 6.2, 6.3, Outcome.REJECTED, 409))
    log.append(LogRecord("s", 4, "x"))
    history.writes.append(Write("s", None, 7.0, 7.1, Outcome.ACK, 204, close=True))
    log.append(LogRecord("s", 6, None, "close"))  # 5: a transaction marker
    history.writes.append(Write("s", "z", 8.0, 8.1, Outcome.REJECTED, 409))
    history.reads.append(Read("s", 0, 3, ("p0", "p1"), 4.0, "long-poll"))
    history.reads.append(Read("s", 3, 5, ("p2", "x"), 7.2, "sse"))
    return history, log


def views(
    payloads: tuple[str, ...], other: tuple[str, ...] | None = None
) -> dict[str, dict[str, View]]:
    fresh = View(200, 7, True, payloads)
    return {"fresh": {"s": fresh}, "a": {"s": replace(fresh, payloads=other or payloads)}}


def reported(history: History, log: list[LogRecord], **kwargs: object) -> dict[str, int]:
    report = check("doctored", history, log, **kwargs)  # type: ignore[arg-type]
    return {kind: report.count(kind) for kind in KINDS if report.count(kind)}


def test_a_clean_history_passes() -> None:
    history, log = clean()
    report = check("clean", history, log, views(("p0", "p1", "p2", "x")), "fresh")
    assert report.ok, report.details()
    assert report.acknowledged == 5
    assert "lost=0 duplicated=0 reordered=0" in report.line()


def test_a_duplicated_record_is_reported() -> None:
    history, log = clean()
    log.append(LogRecord("s", 3, "p1", producer=Producer("p", 0, 1)))  # the retry, again
    log.sort(key=lambda r: r.offset)
    assert "duplicated" in reported(history, log)


def test_a_missing_acknowledged_append_is_reported() -> None:
    history, log = clean()
    log = [r for r in log if r.payload != "x"]
    assert reported(history, log) == {"lost": 1, "stale_reads": 1}


def test_a_missing_acknowledged_close_is_reported() -> None:
    history, log = clean()
    assert reported(history, [r for r in log if r.control != "close"]) == {"lost": 1}


def test_a_reordered_producer_is_reported() -> None:
    history, log = clean()
    log[1], log[2] = replace(log[2], offset=1), replace(log[1], offset=2)
    assert reported(history, log)["reordered"] == 1


def test_data_of_a_rejected_request_is_reported() -> None:
    history, log = clean()
    log.insert(5, LogRecord("s", 5, "y"))  # answered 409, yet written
    assert reported(history, log) == {"phantom": 1}


def test_data_of_a_failed_request_is_reported() -> None:
    history, log = clean()
    history.writes.append(Write("s", "w", 6.4, 6.5, Outcome.FAILED, 503))
    log.insert(5, LogRecord("s", 5, "w"))
    assert reported(history, log) == {"phantom": 1}


def test_data_after_a_close_is_reported() -> None:
    history, log = clean()
    log.append(LogRecord("s", 7, "z"))
    assert reported(history, log) == {"closure": 1, "phantom": 1}


def test_an_append_acknowledged_after_the_close_is_reported() -> None:
    history, log = clean()
    history.writes.append(Write("s", "late", 9.0, 9.1, Outcome.ACK, 204))
    log.insert(5, LogRecord("s", 5, "late"))
    assert reported(history, log) == {"closure": 1}


@pytest.mark.parametrize(
    "read",
    [
        Read("s", 0, 3, ("p0", "p1", "gone"), 4.0, "long-poll"),  # served, later not in Kafka
        Read("s", 0, 3, ("p1", "p0"), 4.0, "sse"),  # out of order
        Read("s", 0, 3, ("p0",), 4.0, "get"),  # a record skipped
    ],
)
def test_a_read_unlike_the_log_is_reported(read: Read) -> None:
    history, log = clean()
    history.reads.append(read)
    assert reported(history, log) == {"stale_reads": 1}


def test_an_instance_unlike_a_fresh_replay_is_reported() -> None:
    history, log = clean()
    both = views(("p0", "p1", "p2", "x"), ("p0", "p1", "p2", "x", "p1"))
    assert reported(history, log, views=both, fresh="fresh") == {"divergent": 1}


def test_a_fresh_replay_unlike_the_log_is_reported() -> None:
    history, log = clean()
    stale = views(("p0", "p1", "p2"))
    assert reported(history, log, views=stale, fresh="fresh") == {"divergent": 1}
