"""Connection counts and the memory cap (`adapter/http/connections.py`)."""

from __future__ import annotations

from adapter.http.connections import (
    MAX_BACKLOG,
    ConnectionCounts,
    ConnectionLimits,
    ResidentMemory,
    listen_backlog,
)


def _limits(total: int, per_address: int) -> ConnectionLimits:
    return ConnectionLimits(1.0, 1.0, 1.0, total, per_address)


def test_one_address_is_refused_past_its_limit_and_others_are_not() -> None:
    counts = ConnectionCounts(_limits(0, 2))
    for _ in range(2):
        assert counts.refusal("10.0.0.1") is None
        counts.admit("10.0.0.1")
    assert counts.refusal("10.0.0.1") is None  # not refused at once for its address
    assert "one client address" in (counts.over_address("10.0.0.1") or "")
    assert counts.over_address("10.0.0.2") is None
    counts.release("10.0.0.1")
    assert counts.over_address("10.0.0.1") is None
    assert counts.per_address == {"10.0.0.1": 1}


def test_every_address_is_refused_past_the_total() -> None:
    counts = ConnectionCounts(_limits(3, 0))
    for address in ("a", "b", "c"):
        counts.admit(address)
    assert "connections to this instance" in (counts.refusal("d") or "")
    counts.release("b")
    assert counts.refusal("d") is None
    assert counts.total == 2


def test_a_peers_connection_counts_in_all_but_never_against_its_address() -> None:
    counts = ConnectionCounts(_limits(4, 1))
    counts.admit("10.0.0.1")
    counts.peer("10.0.0.1")  # admitted under its address, then known as a peer's
    assert counts.over_address("10.0.0.1") is None  # its place is free for a client again
    counts.admit("10.0.0.1")
    assert counts.over_address("10.0.0.1") is not None
    counts.admit_unaddressed()  # over its address: maybe a peer's, counted in all only
    assert (counts.total, counts.per_address) == (3, {"10.0.0.1": 1})
    counts.admit("10.0.0.2")
    assert "connections to this instance" in (counts.refusal("10.0.0.3") or "")
    counts.release_peer()
    counts.release_peer()
    assert (counts.total, counts.per_address) == (2, {"10.0.0.1": 1, "10.0.0.2": 1})


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def test_no_cap_is_never_over() -> None:
    assert not ResidentMemory(0).over()


def test_a_cap_below_the_process_is_over_and_reread_only_after_a_while() -> None:
    clock = Clock()
    memory = ResidentMemory(1, every_s=1.0, clock=clock)
    assert memory.over()
    memory.cap = 1 << 50
    assert memory.over()  # not read again yet
    clock.now = 1.0
    assert not memory.over()


def test_the_backlog_holds_as_many_as_would_be_admitted_up_to_the_most_listen_takes() -> None:
    assert listen_backlog(1000) == 1000
    assert listen_backlog(0) == MAX_BACKLOG  # no limit
    assert listen_backlog(10 * MAX_BACKLOG) == MAX_BACKLOG


def test_a_connection_on_the_highest_descriptors_is_refused_whatever_the_count() -> None:
    counts = ConnectionCounts(ConnectionLimits(1.0, 1.0, 1.0, 0, 0, descriptor_ceiling=960))
    assert counts.refusal("a", 959) is None
    assert "short of file descriptors" in (counts.refusal("a", 960) or "")


def test_handshakes_under_way_count_with_the_connections_admitted() -> None:
    counts = ConnectionCounts(_limits(3, 0))
    counts.admit("a")
    assert not counts.full(handshaking=1)
    assert counts.full(handshaking=2)
    assert not ConnectionCounts(_limits(0, 0)).full(handshaking=10_000)  # no limit
