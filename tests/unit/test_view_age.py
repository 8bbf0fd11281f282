"""`ViewAge`: a view is current only within its bound of the last moment it was measured."""

from __future__ import annotations

from adapter.state.view_age import ViewAge


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_view_never_measured_is_not_current() -> None:
    view = ViewAge(5.0, Clock())
    assert view.age_s() is None
    assert not view.current()


def test_a_view_is_current_within_its_bound_of_the_moment_asked() -> None:
    clock = Clock()
    view = ViewAge(5.0, clock)
    view.reached(98.0)  # asked at 98, reached by 100
    assert view.age_s() == 2.0
    assert view.current()
    clock.now = 103.0
    assert view.current()
    clock.now = 103.5
    assert not view.current()


def test_an_older_measure_finishing_late_does_not_move_the_view_back() -> None:
    clock = Clock()
    view = ViewAge(5.0, clock)
    view.reached(99.0)
    view.reached(97.0)
    assert view.age_s() == 1.0
