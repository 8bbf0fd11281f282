"""The owners' group consumer: heartbeats short enough to keep rebalances brief; no impostor."""

from __future__ import annotations

import pytest

from adapter.cluster.ownership import (
    REFENCE_WINDOW_S,
    REFENCES,
    heartbeat_ms,
    impostor,
    recent_fences,
)
from topology.group_members import Member


@pytest.mark.parametrize(
    ("session_ms", "heartbeat"), [(1_000, 333), (6_000, 1_000), (10_000, 1_000), (300, 100)]
)
def test_owners_heartbeat_is_a_third_of_the_session_at_most_a_second(
    session_ms: int, heartbeat: int
) -> None:
    assert heartbeat_ms(session_ms) == heartbeat


def _member(instance_id: str, client_id: str) -> Member:
    return Member(group_instance_id=instance_id, client_id=client_id)


def test_our_former_incarnation_is_no_impostor() -> None:
    members = [_member("a", "http://a:1"), _member("b", "http://b:1")]
    assert impostor(members, "a", "http://a:1") is None
    assert impostor(members, "c", "http://c:1") is None


def test_our_instance_id_under_another_url_is_an_impostor() -> None:
    assert impostor([_member("a", "http://b:1")], "a", "http://a:1") == "http://b:1"


def test_fences_older_than_the_window_are_forgotten() -> None:
    assert recent_fences([0.0, 10.0], REFENCE_WINDOW_S + 5) == [10.0, REFENCE_WINDOW_S + 5]


def test_a_coordinator_moving_every_few_seconds_never_reaches_the_limit() -> None:
    fences: list[float] = []
    for turn in range(100):  # a flap: the coordinator moves every 12 s
        fences = recent_fences(fences, turn * 12.0)
        assert len(fences) < REFENCES


def test_two_members_fencing_each_other_at_every_join_reach_it() -> None:
    fences: list[float] = []
    for turn in range(REFENCES):  # one join a second
        fences = recent_fences(fences, float(turn))
    assert len(fences) == REFENCES


def test_a_member_saying_the_format_level_it_reads_is_known_by_its_url() -> None:
    former = _member("a", "http://a:1#reads=6")  # this version's own former incarnation
    assert impostor([former], "a", "http://a:1") is None
    assert impostor([_member("a", "http://b:1#reads=6")], "a", "http://a:1") == "http://b:1"
