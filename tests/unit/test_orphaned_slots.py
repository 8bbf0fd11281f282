"""A slot this instance took last and holds no more, which no newer owner took within the
bound, makes the instance rejoin the owners' group (once, then the bound starts again)."""

from __future__ import annotations

from adapter.cluster.orphaned_slots import OrphanedSlots

ME, OTHER = "http://me:1", "http://other:2"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def watch(
    owners: dict[int, str], held: set[int], aside: list[bool] | None = None
) -> tuple[OrphanedSlots, Clock, list[int]]:
    clock, asked = Clock(), []
    orphans = OrphanedSlots(
        ME,
        4,
        owners.get,
        lambda: held,
        lambda: asked.append(1),
        30.0,
        (lambda: aside[0]) if aside else (lambda: False),
        clock,
    )
    return orphans, clock, asked


def test_a_slot_left_by_us_and_taken_by_nobody_makes_us_rejoin_after_the_bound() -> None:
    owners = {0: ME, 1: ME, 2: OTHER, 3: OTHER}
    orphans, clock, asked = watch(owners, held={0})
    assert not orphans.check()  # slot 1: ours last, not held; the bound starts
    clock.now = 29.9
    assert not orphans.check()
    clock.now = 30.0
    assert orphans.check()
    assert asked == [1]
    clock.now = 31.0
    assert not orphans.check()  # the bound starts again after a rejoin
    clock.now = 61.0
    assert orphans.check()
    assert asked == [1, 1]


def test_a_slot_a_newer_owner_took_or_that_we_hold_again_is_no_orphan() -> None:
    owners = {0: ME, 1: ME}
    held = {0}
    orphans, clock, asked = watch(owners, held)
    orphans.check()
    clock.now = 20.0
    owners[1] = OTHER  # its new owner's record came
    orphans.check()
    clock.now = 25.0
    owners[1] = ME  # ours again, and held
    held.add(1)
    orphans.check()
    clock.now = 100.0
    assert not orphans.check()
    assert asked == []


def test_standing_aside_holds_nothing_on_purpose() -> None:
    aside = [True]
    orphans, clock, asked = watch({0: ME}, held=set(), aside=aside)
    orphans.check()
    clock.now = 100.0
    assert not orphans.check()
    aside[0] = False
    assert not orphans.check()  # the bound starts when it stops standing aside
    clock.now = 130.0
    assert orphans.check()
    assert asked == [1]
