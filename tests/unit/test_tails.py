"""Guessing where a writer's records land: only from what its own commits taught it."""

from __future__ import annotations

from dataclasses import dataclass

from adapter.log import tails
from adapter.log.tails import PartitionTails


@dataclass(frozen=True)
class R:
    topic: str
    partition: int


def test_nothing_is_guessed_for_a_partition_never_committed_to() -> None:
    known = PartitionTails()
    assert known.guess([[R("t", 0)]]) is None
    assert known.guess([[]]) == [[]]  # no records: nothing to guess


def test_after_a_commit_records_follow_its_marker_in_order_across_batches() -> None:
    known = PartitionTails()
    known.committed([[R("t", 0), R("t", 1)], [R("t", 0)]], [[10, 4], [11]])
    assert len(known) == 2
    batches = [[R("t", 0), R("t", 0)], [R("t", 1), R("t", 0)]]
    assert known.guess(batches) == [[13, 14], [6, 15]]
    assert known.guess([[R("t", 0), R("u", 0)]]) is None  # one unknown partition: no guess


def test_forgetting_and_the_bound() -> None:
    known = PartitionTails()
    known.committed([[R("t", 0)]], [[1]])
    known.forget()
    assert known.guess([[R("t", 0)]]) is None
    many = [[R("t", p) for p in range(tails.MAX_PARTITIONS + 1)]]
    known.committed(many, [list(range(tails.MAX_PARTITIONS + 1))])
    known.committed([[R("u", 0)]], [[7]])  # past the bound the table starts again
    assert len(known) == 1
    assert known.guess([[R("u", 0)]]) == [[9]]
