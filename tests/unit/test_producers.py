"""The idempotent-producer state machine, case by case (§5.2.1)."""

from __future__ import annotations

import pytest

from adapter.protocol.headers import ProducerHeaders
from adapter.protocol.producers import (
    Accepted,
    Decision,
    Duplicate,
    EpochMustStartAtZero,
    ProducerState,
    SequenceGap,
    StaleEpoch,
    decide,
)


def _request(epoch: int, seq: int) -> ProducerHeaders:
    return ProducerHeaders("p", epoch, seq)


@pytest.mark.parametrize(
    ("state", "epoch", "seq", "decision"),
    [
        (None, 0, 0, Accepted(ProducerState(0, 0))),
        (None, 5, 0, Accepted(ProducerState(5, 0))),  # auto-claim of a fresh id
        (None, 0, 3, SequenceGap(0, 3)),
        (ProducerState(0, 4), 0, 5, Accepted(ProducerState(0, 5))),
        (ProducerState(0, 4), 0, 4, Duplicate(0, 4)),
        (ProducerState(0, 4), 0, 0, Duplicate(0, 4)),  # echoes the highest, not the request
        (ProducerState(0, 4), 0, 7, SequenceGap(5, 7)),
        (ProducerState(2, 4), 1, 9, StaleEpoch(2)),  # zombie fencing
        (ProducerState(2, 4), 3, 0, Accepted(ProducerState(3, 0))),
        (ProducerState(2, 4), 3, 1, EpochMustStartAtZero(3, 1)),
    ],
)
def test_decide(state: ProducerState | None, epoch: int, seq: int, decision: Decision) -> None:
    assert decide(state, _request(epoch, seq)) == decision
