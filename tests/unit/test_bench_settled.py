"""The suite's wait for divided write slots, read from the instances' `/readyz` fields."""

from bench.suite_servers import Ownership, ownership, settled


def _owns(*slots: int, initialising: tuple[int, ...] = ()) -> Ownership:
    return Ownership(frozenset(slots), 8, frozenset(initialising))


def test_reads_the_ownership_fields() -> None:
    check = {"ok": True, "detail": "owns 4/8 slots: 0,2,5,7", "since_ms": 1}
    fields = {"owned_slots": [0, 2, 5, 7], "slot_count": 8, "initialising": [], "joined": True}
    assert ownership({"checks": {"ownership": check | fields}}) == _owns(0, 2, 5, 7)
    assert ownership({"checks": {"ownership": check}}) is None  # a server without the fields
    assert ownership({"checks": {}}) is None
    assert ownership([]) is None


def test_settled_when_every_slot_has_exactly_one_owner() -> None:
    assert settled([_owns(4, 5, 6, 7), _owns(0, 1, 2, 3)])
    assert settled([_owns(*range(8)), _owns()])


def test_not_settled_mid_rebalance() -> None:
    # The first cooperative round: the joiner got nothing, slots 0-3 are revoked and unowned.
    assert not settled([_owns(4, 5, 6, 7), _owns()])
    assert not settled([_owns(4, 5, 6, 7), _owns(initialising=(0, 1))])
    assert not settled([_owns(3, 4, 5, 6, 7), _owns(0, 1, 2, 3)])  # overlap
    assert not settled([_owns(4, 5, 6, 7), None])  # one not ready
    assert not settled([_owns(*range(8)), Ownership(frozenset(), 16, frozenset())])
