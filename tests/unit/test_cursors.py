"""Stream-Cursor values: 20 s intervals since the protocol's epoch, never going backwards."""

from __future__ import annotations

import pytest

from adapter.protocol.cursors import (
    EPOCH_MS,
    current_interval,
    cursor_after,
    jitters,
    next_cursor,
    parse_cursor,
)


def test_interval_counts_20_second_steps_from_the_epoch() -> None:
    assert current_interval(EPOCH_MS) == 0
    assert current_interval(EPOCH_MS + 19_999) == 0
    assert current_interval(EPOCH_MS + 20_000) == 1


def test_cursor_is_the_current_interval_when_the_client_is_behind() -> None:
    now = EPOCH_MS + 100 * 20_000
    assert next_cursor(now, None) == "100"
    assert next_cursor(now, "99") == "100"
    assert next_cursor(now, "garbage") == "100"


@pytest.mark.parametrize(("jitter_s", "step"), [(1, 1), (19, 1), (40, 2), (3600, 180)])
def test_a_client_not_behind_gets_a_strictly_greater_cursor(jitter_s: int, step: int) -> None:
    now = EPOCH_MS + 100 * 20_000
    assert next_cursor(now, "100", lambda: jitter_s) == str(100 + step)
    assert next_cursor(now, "500", lambda: jitter_s) == str(500 + step)


def test_random_jitter_stays_within_an_hour() -> None:
    now = EPOCH_MS + 100 * 20_000
    for _ in range(200):
        assert 101 <= int(next_cursor(now, "100")) <= 100 + 3600 // 20


def test_parsed_cursors_give_the_same_answers() -> None:
    assert parse_cursor("123") == 123
    assert parse_cursor("-1") is None
    assert parse_cursor(None) is None
    assert cursor_after(100, None) == "100"
    assert cursor_after(100, 99) == "100"
    assert cursor_after(100, 100, lambda: 40) == "102"


def test_only_a_cursor_not_behind_jitters() -> None:
    assert [jitters(c, 100) for c in (None, 0, 99, 100, 101)] == [False] * 3 + [True] * 2
