"""The idempotent-producer state machine, case by case (§5.2.1)."""

from __future__ import annotations

import pytest

from adapter.protocol.producers import (
    Accepted,
    Decision,
    Duplicate,
    EpochMustStartAtZero,
    ProducerPosition,
    SequenceGap,
    StaleEpoch,
    decide,
)
from topology.wire import ProducerStamp


def _request(epoch: int, seq: int) -> ProducerStamp:
    return ProducerStamp("p", epoch, seq)


@pytest.mark.parametrize(
    ("state", "epoch", "seq", "decision"),
    [
        (None, 0, 0, Accepted(ProducerPosition(0, 0))),
        (None, 5, 0, Accepted(ProducerPosition(5, 0))),  # auto-claim of a fresh id
        (None, 0, 3, SequenceGap(0, 3)),
        (ProducerPosition(0, 4), 0, 5, Accepted(ProducerPosition(0, 5))),
        (ProducerPosition(0, 4), 0, 4, Duplicate(ProducerPosition(0, 4))),
        (
            ProducerPosition(0, 4),
            0,
            0,
            Duplicate(ProducerPosition(0, 4)),
        ),  # echoes the highest, not the request
        (ProducerPosition(0, 4), 0, 7, SequenceGap(5, 7)),
        (ProducerPosition(2, 4), 1, 9, StaleEpoch(2)),  # zombie fencing
        (ProducerPosition(2, 4), 3, 0, Accepted(ProducerPosition(3, 0))),
        (ProducerPosition(2, 4), 3, 1, EpochMustStartAtZero(3, 1)),
    ],
)
def test_decide(state: ProducerPosition | None, epoch: int, seq: int, decision: Decision) -> None:
    assert decide(state, _request(epoch, seq)) == decision
