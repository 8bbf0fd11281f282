"""Echoes of this instance's own state records, known by their offsets."""

from __future__ import annotations

from adapter.state.echoes import Echoes

KEY = "stream:b/s"


def test_an_echo_is_known_by_its_offset_and_seen_once() -> None:
    echoes = Echoes()
    echoes.wrote([("meta", KEY, 7), ("producers", "b/s\x00p", 8)])
    assert not echoes.is_news("meta", KEY, 3)  # older than ours
    assert not echoes.is_news("meta", KEY, 7)  # ours
    assert echoes.is_news("meta", KEY, 9)  # someone else's, after ours
    assert echoes.is_news("meta", KEY, 7)  # forgotten once seen
    assert echoes.is_news("meta", "stream:b/other", 1)  # never written here
    assert not echoes.is_news("producers", "b/s\x00p", 8)
    assert len(echoes) == 0


def test_the_last_offset_written_counts() -> None:
    echoes = Echoes()
    echoes.wrote([("meta", KEY, 9)])
    echoes.wrote([("meta", KEY, 4)])  # a write's report never moves the mark back
    assert not echoes.is_news("meta", KEY, 7)
    assert not echoes.is_news("meta", KEY, 9)
    assert echoes.is_news("meta", KEY, 10)
