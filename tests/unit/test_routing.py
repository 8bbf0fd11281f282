"""The routing decision for a write: here, forwarded to the owner, or refused while moving."""

from __future__ import annotations

from adapter.cluster.routing import Forward, Local, Moving, decide

ME = "http://10.0.0.1:4437"
OTHER = "http://10.0.0.2:4437"


def test_a_slot_accepting_writes_here_is_handled_here() -> None:
    assert decide(3, accepting=True, owner_url=OTHER, own_url=ME) == Local(3)


def test_a_slot_owned_elsewhere_is_forwarded_there() -> None:
    assert decide(3, accepting=False, owner_url=OTHER, own_url=ME) == Forward(3, OTHER)


def test_no_known_owner_means_moving() -> None:
    assert decide(3, accepting=False, owner_url=None, own_url=ME) == Moving(3)


def test_our_own_slot_still_initialising_is_moving_not_forwarded_to_ourselves() -> None:
    assert decide(3, accepting=False, owner_url=ME, own_url=ME) == Moving(3)
