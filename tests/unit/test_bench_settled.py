"""The suite's wait for divided write slots, read from the instances' `/readyz` details."""

from bench.suite_servers import owned_slots, settled


def test_reads_the_ownership_detail() -> None:
    assert owned_slots("owns 4/8 slots: 0,2,5,7") == ({0, 2, 5, 7}, 8)
    assert owned_slots("owns 0/8 slots: none") == (set(), 8)
    assert owned_slots("") is None


def test_settled_when_every_slot_has_exactly_one_owner() -> None:
    assert settled(["owns 4/8 slots: 4,5,6,7", "owns 4/8 slots: 0,1,2,3"])
    assert settled(["owns 8/8 slots: 0,1,2,3,4,5,6,7", "owns 0/8 slots: none"])


def test_not_settled_mid_rebalance() -> None:
    # The first cooperative round: the joiner got nothing, slots 0-3 are revoked and unowned.
    assert not settled(["owns 4/8 slots: 4,5,6,7", "owns 0/8 slots: none"])
    assert not settled(["owns 4/8 slots: 4,5,6,7", "owns 0/8 slots: none (initialising [0, 1])"])
    assert not settled(["owns 5/8 slots: 3,4,5,6,7", "owns 4/8 slots: 0,1,2,3"])  # overlap
    assert not settled(["owns 4/8 slots: 4,5,6,7", ""])  # one not ready
