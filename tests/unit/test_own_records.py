"""Echoes of this instance's own state records, known by their offsets."""

from __future__ import annotations

from adapter.state.own_records import Echoes

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


def test_an_applied_commit_hides_its_echo() -> None:
    echoes = Echoes()
    echoes.wrote([("meta", KEY, 7)])
    assert echoes.settled([("meta", KEY, 7)], applied=True) == []
    assert not echoes.is_news("meta", KEY, 7)


def test_the_echo_of_a_commit_settled_unapplied_is_news() -> None:
    """An unknown outcome answered 503: if the commit happened after all, its state records
    must reach the catalog (and drop the hot tail) like anyone else's."""
    echoes = Echoes()
    echoes.wrote([("meta", KEY, 7)])
    assert echoes.settled([("meta", KEY, 7)], applied=False) == []
    assert echoes.is_news("meta", KEY, 7, b"v")
    assert len(echoes) == 0


def test_an_echo_seen_while_open_comes_back_when_settled_unapplied() -> None:
    echoes = Echoes()
    echoes.wrote([("meta", KEY, 7), ("producers", "b/s\x00p", 8)])
    assert not echoes.is_news("meta", KEY, 7, b"meta-7")
    assert not echoes.is_news("producers", "b/s\x00p", 8, b"producer-8")
    late = echoes.settled([("meta", KEY, 7), ("producers", "b/s\x00p", 8)], applied=False)
    assert late == [("meta", KEY, b"meta-7"), ("producers", "b/s\x00p", b"producer-8")]


def test_a_held_echo_superseded_by_news_is_not_handed_back() -> None:
    echoes = Echoes()
    echoes.wrote([("meta", KEY, 7)])
    assert not echoes.is_news("meta", KEY, 7, b"meta-7")
    assert echoes.is_news("meta", KEY, 12, b"meta-12")  # a newer owner's record, applied
    assert echoes.settled([("meta", KEY, 7)], applied=False) == []


def test_an_echo_seen_while_open_is_dropped_when_applied() -> None:
    echoes = Echoes()
    echoes.wrote([("meta", KEY, 7)])
    assert not echoes.is_news("meta", KEY, 7, b"meta-7")
    assert echoes.settled([("meta", KEY, 7)], applied=True) == []


def test_a_checkpoint_stays_below_a_commit_still_open() -> None:
    """The follower may pass the echo of a commit whose outcome is still open (not in the
    catalog yet): the lowest such offset per topic bounds what a checkpoint may claim."""
    echoes = Echoes()
    echoes.wrote([("meta", "a", 7), ("meta", "b", 9), ("producers", "a", 3)])
    assert (echoes.floor("meta"), echoes.floor("producers"), echoes.floor("tier")) == (7, 3, None)
    echoes.settled([("meta", "a", 7), ("producers", "a", 3)], applied=True)
    assert (echoes.floor("meta"), echoes.floor("producers")) == (9, None)
    echoes.settled([("meta", "b", 9)], applied=False)
    assert echoes.floor("meta") is None
