"""The chain of deadlines: a forwarded write waits longer than its owner may take."""

from __future__ import annotations

import pytest

from adapter.cluster.deadlines import forward_timeout_s, owner_answer_s


@pytest.mark.parametrize(("timeout_s", "owner_s"), [(10.0, 261.0), (3.0, 79.0), (0.1, 3.6)])
def test_the_owner_answers_within_26_kafka_timeouts_and_a_second(
    timeout_s: float, owner_s: float
) -> None:
    assert owner_answer_s(timeout_s) == pytest.approx(owner_s)


def test_forwarding_outwaits_the_owner() -> None:
    assert forward_timeout_s(10.0) == pytest.approx(owner_answer_s(10.0) + 5)
