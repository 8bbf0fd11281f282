"""The meta topic is followed to now only for a change decided elsewhere, and a follow that
cannot be done in time says so instead of raising."""

from __future__ import annotations

import pytest

from adapter.cluster.catch_up import MetaCatchUp
from adapter.log.errors import LogUnavailable

OURS = 1


class _Writers:
    def __init__(self, every: bool = False) -> None:
        self.every = every

    def accepting(self, slot: int) -> bool:
        return self.every or slot == OURS

    def accepting_all(self) -> bool:
        return self.every


class _Follower:
    def __init__(self, fails: bool = False) -> None:
        self.fails = fails
        self.followed = 0

    async def seen_written(self) -> None:
        self.followed += 1
        if self.fails:
            raise LogUnavailable("a transaction is left open on the meta topic")


@pytest.mark.parametrize(
    ("slot", "every", "followed"),
    [(OURS, False, 0), (2, False, 1), (None, False, 1), (None, True, 0), (2, True, 0)],
)
async def test_only_a_change_decided_elsewhere_is_followed(
    slot: int | None, every: bool, followed: int
) -> None:
    follower = _Follower()
    catch_up = MetaCatchUp(_Writers(every), follower.seen_written)
    assert await catch_up.unless_local(slot, "a read")
    assert follower.followed == followed


async def test_a_follow_that_fails_in_time_says_so() -> None:
    follower = _Follower(fails=True)
    assert not await MetaCatchUp(_Writers(), follower.seen_written).unless_local(2, "a read")


async def test_a_process_on_its_own_log_never_follows() -> None:
    assert await MetaCatchUp(_Writers(), None).unless_local(2, "a read")
