"""What the instances' logs and the history say of the recovery path, and a report that
requires it."""

from __future__ import annotations

import json

from tests.faults.check import check
from tests.faults.history import History, Outcome, Producer, Write
from tests.faults.recovery import Recovery, Takeover, in_flight, recovery, takeovers

CHANGED = (
    "write slot 3: 12 streams carried forward over 140 records (5 changed) in 31 ms "
    "(the catalog's streams listed and covered offsets read in 2 ms, 2 of 3 partitions "
    "covered); 0 ahead of their state records"
)
UNCHANGED = (
    "write slot 4: 7 streams carried forward over 0 records (0 changed) in 1 ms "
    "(the catalog's streams listed and covered offsets read in 2 ms, 0 of 1 partitions "
    "covered); 0 ahead of their state records"
)


def logged(message: str) -> str:
    """A JSON log line as the adapter writes one."""
    return json.dumps({"time": "t", "level": "INFO", "logger": "x", "message": message})


def test_takeovers_are_read_from_json_and_text_lines() -> None:
    lines = [logged(CHANGED), f"2026-12-07 06:00:00 INFO x: {UNCHANGED}", logged("serving")]
    assert takeovers(lines) == [Takeover(3, 12, 140, 5, covered=2), Takeover(4, 7, 0, 0)]


def test_only_takeovers_that_changed_streams_count_as_such() -> None:
    found = recovery([logged(CHANGED), logged(UNCHANGED), "not json {"], [], 0.0)
    assert found == Recovery(takeovers=1, streams_changed=5, records_carried=140, covered=1)


def attempt(invoked: float, outcome: Outcome, status: int, seq: int = 0) -> Write:
    stamp = Producer("p", 0, seq)
    return Write("s", f"p.{seq}", invoked, invoked + 0.5, outcome, status, stamp)


def test_a_retry_after_an_unknown_outcome_answered_204_is_a_retried_duplicate() -> None:
    writes = [attempt(1.0, Outcome.LOST, 0), attempt(2.0, Outcome.ACK, 204)]
    assert recovery([], writes, since=1.5).retried_duplicates == 1
    # Before the fault began: not the recovery's doing.
    assert recovery([], writes, since=2.5).retried_duplicates == 0


def test_other_answers_are_no_retried_duplicates() -> None:
    first_try = [attempt(2.0, Outcome.ACK, 204)]  # never unknown: a 204 of another kind
    new_data = [attempt(1.0, Outcome.TIMEOUT, 0), attempt(2.0, Outcome.ACK, 200)]
    refused = [attempt(1.0, Outcome.FAILED, 503), attempt(2.0, Outcome.ACK, 204)]
    plain = [Write("s", "x", 1.0, 1.5, Outcome.LOST), Write("s", "x", 2.0, 2.5, Outcome.ACK, 204)]
    for writes in (first_try, new_data, refused, plain):
        assert recovery([], writes, since=0.0).retried_duplicates == 0, writes


def test_a_stream_is_in_flight_while_an_append_to_it_is_unanswered() -> None:
    writes = [attempt(1.0, Outcome.LOST, 0), Write("t", "y", 1.6, 1.7, Outcome.ACK, 200)]
    assert in_flight(writes, 1.2) == {"s"}
    assert in_flight(writes, 1.65) == {"t"}


def test_a_report_fails_when_what_it_needs_was_not_exercised() -> None:
    report = check("recovering", History(), [])
    report.require({"takeovers": 0, "trims": 3}, ["takeovers", "trims"])
    assert not report.ok
    assert report.unexercised == ["takeovers"]
    assert "unexercised=takeovers" in report.line()
    assert "unexercised: takeovers stayed 0" in report.details()


def test_a_report_passes_when_what_it_needs_was_exercised() -> None:
    report = check("recovering", History(), [])
    report.require({"takeovers": 2}, ["takeovers"])
    assert report.ok, report.line()
    assert "unexercised" not in report.line()
