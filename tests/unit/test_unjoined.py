"""When the owners' consumer, subscribed but no member of its group, is made again."""

from __future__ import annotations

import pytest

from adapter.cluster.unjoined import Unjoined, unjoined_s


@pytest.mark.parametrize(("session_ms", "limit_s"), [(6_000, 30.0), (10_000, 50.0), (1_000, 30.0)])
def test_the_consumer_is_made_again_after_five_sessions_without_membership_at_least_30s(
    session_ms: int, limit_s: float
) -> None:
    assert unjoined_s(session_ms) == limit_s


def test_only_an_unbroken_stretch_without_membership_counts() -> None:
    unjoined = Unjoined(30.0)
    assert not unjoined.too_long(True, 0.0)
    assert not unjoined.too_long(True, 29.0)
    assert not unjoined.too_long(False, 29.5)  # a member again: the count starts over
    assert not unjoined.too_long(True, 40.0)
    assert not unjoined.too_long(True, 70.0)
    assert unjoined.too_long(True, 70.5)
