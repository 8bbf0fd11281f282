"""The writer's test-only faults: counts to inject, and one commit in every N lost."""

from __future__ import annotations

from adapter.log.faults import WriterFaults


def test_no_fault_by_default() -> None:
    faults = WriterFaults()
    assert {faults.next_commit() for _ in range(100)} == {(False, False)}


def test_counts_are_injected_first_then_spent() -> None:
    faults = WriterFaults(drop_commit_requests=1, drop_commit_replies=2)
    outcomes = [faults.next_commit() for _ in range(4)]
    assert outcomes == [(True, False), (False, True), (False, True), (False, False)]
    assert faults.drop_commit_requests == faults.drop_commit_replies == 0


def test_every_nth_commit_loses_its_reply_then_its_request_in_turn() -> None:
    faults = WriterFaults(every=3)
    lost = [(n, faults.next_commit()) for n in range(1, 13)]
    assert [(n, what) for n, what in lost if what != (False, False)] == [
        (3, (False, True)),
        (6, (True, False)),
        (9, (False, True)),
        (12, (True, False)),
    ]
