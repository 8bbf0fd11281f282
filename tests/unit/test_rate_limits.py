"""Token buckets and the reader cap, on a clock the test moves (no sleeping, no timing)."""

from __future__ import annotations

from adapter.auth.token_buckets import RateLimiter, ReaderCap


def test_a_burst_then_the_rate() -> None:
    limiter = RateLimiter(rate=2, burst=3)
    assert [limiter.take("k", 1, 0.0) for _ in range(4)] == [0, 0, 0, 1]
    assert limiter.take("k", 1, 0.5) == 0  # one unit came back in half a second
    assert limiter.take("k", 1, 0.5) == 1
    assert limiter.take("k", 1, 100.0) == 0  # refilled, capped at the burst
    assert [limiter.take("k", 1, 100.0) for _ in range(3)] == [0, 0, 1]


def test_keys_are_apart() -> None:
    limiter = RateLimiter(rate=1, burst=1)
    assert limiter.take(("alice", "logs"), 1, 0) == 0
    assert limiter.take(("alice", "logs"), 1, 0) == 1
    assert limiter.take(("bob", "logs"), 1, 0) == 0
    assert limiter.take(("alice", "other"), 1, 0) == 0


def test_a_cost_over_the_burst_passes_once_then_waits_off_its_debt() -> None:
    limiter = RateLimiter(rate=100, burst=100)
    assert limiter.take("k", 1000, 0) == 0
    assert limiter.take("k", 1, 0) == 10  # 901 units of debt at 100/s, rounded up
    assert limiter.take("k", 1, 9.0) == 1
    assert limiter.take("k", 1, 9.02) == 0


def test_charging_after_the_fact_counts() -> None:
    limiter = RateLimiter(rate=1, burst=5)
    limiter.charge("k", 5, 0)
    assert limiter.take("k", 1, 0) == 1


def test_the_keys_kept_are_bounded() -> None:
    limiter = RateLimiter(rate=1, burst=1, max_keys=2)
    for key in ("a", "b", "c"):
        assert limiter.take(key, 1, 0) == 0
    assert limiter.take("a", 1, 0) == 0  # forgotten, so full again
    assert limiter.take("c", 1, 0) == 1


def test_reader_cap() -> None:
    cap = ReaderCap(2)
    assert cap.enter("b")
    assert cap.enter("b")
    assert not cap.enter("b")
    assert cap.enter("other")
    cap.leave("b")
    assert cap.enter("b")
    cap.leave("b")
    cap.leave("b")
    cap.leave("other")
    assert cap.live == {}
