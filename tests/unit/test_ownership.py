"""The owners' group consumer's settings: heartbeats short enough to keep rebalances brief."""

from __future__ import annotations

import pytest

from adapter.cluster.ownership import heartbeat_ms


@pytest.mark.parametrize(
    ("session_ms", "heartbeat"), [(1_000, 333), (6_000, 1_000), (10_000, 1_000), (300, 100)]
)
def test_owners_heartbeat_is_a_third_of_the_session_at_most_a_second(
    session_ms: int, heartbeat: int
) -> None:
    assert heartbeat_ms(session_ms) == heartbeat
