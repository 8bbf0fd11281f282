"""An owner is evicted only once connections to its address are refused for the whole bound,
or once it answered no liveness probe for the whole bound while accepting connections; once
per quiet period, never a sibling worker; every check's outcome counted."""

from __future__ import annotations

import asyncio

import pytest

from adapter.cluster import dead_owners
from adapter.cluster.dead_owners import Bounds, DeadOwners, Outcome, Probes, Signal
from adapter.metrics import EVICTION_OUTCOMES, EVICTION_SIGNALS
from topology.errors import BrokerUnavailable

URL = "http://10.0.0.2:4437"
BOUNDS = Bounds(refused_s=0.5, unanswered_s=0.05)


class _Peer:
    def __init__(self, listens: list[bool | None], answers: list[bool] | None = None) -> None:
        # What each connection finds: accepted (True), refused (False), timed out (None).
        self.listens = listens
        self.answers_ = answers or []  # whether each liveness probe is answered
        self.asked = 0
        self.probed = 0
        self.evicted: list[str] = []
        self.members = ["member"]
        self.failure: Exception | None = None  # what the removal raises, if anything
        self.counted: list[tuple[Signal, Outcome, int]] = []

    async def accepts(self, _url: str) -> bool | None:
        self.asked += 1
        return self.listens.pop(0) if self.listens else False

    async def answers(self, _url: str, within_s: float) -> bool:
        self.probed += 1
        if self.answers_:
            return self.answers_.pop(0)
        await asyncio.sleep(within_s)  # a paused process: accepted, never answered
        return False

    async def evict(self, url: str) -> list[str]:
        self.evicted.append(url)
        if self.failure is not None:
            raise self.failure
        return self.members

    def count(self, signal: Signal, outcome: Outcome, members: int) -> None:
        self.counted.append((signal, outcome, members))


def _owners(peer: _Peer, siblings: tuple[str, ...] = (), bounds: Bounds = BOUNDS) -> DeadOwners:
    probes = Probes(peer.accepts, peer.answers)
    return DeadOwners(probes, peer.evict, bounds, siblings, peer.count)


@pytest.fixture
def _short(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dead_owners, "PROBE_PAUSE_S", 0.0)
    monkeypatch.setattr(dead_owners, "CONFIRM_PAUSE_S", 0.01)


async def _settle(owners: DeadOwners) -> None:
    """Let the checks under way end (those that have not after 0.5 s are cancelled); the
    owners stay open, so that a later suspicion is checked again."""
    for _ in range(50):
        await asyncio.sleep(0.01)
        if not owners._checking:
            break
    checks = list(owners._checking.values())
    for check in checks:
        check.cancel()
    await asyncio.gather(*checks, return_exceptions=True)


@pytest.mark.parametrize(("refused_ms", "connections"), [(100, 1), (250, 1), (500, 2), (1000, 4)])
def test_the_refusal_bound_is_met_by_connections_a_quarter_second_apart_at_most(
    refused_ms: int, connections: int
) -> None:
    assert Bounds(refused_s=refused_ms / 1000).confirmations() == connections


@pytest.mark.usefixtures("_short")
async def test_an_address_refusing_every_confirmation_is_evicted_once() -> None:
    peer = _Peer([])
    owners = _owners(peer, bounds=Bounds(refused_s=0.01))
    owners.suspect(URL)
    owners.suspect(URL)  # a check in flight: not a second one
    await _settle(owners)
    assert (peer.asked, peer.evicted, owners.evictions) == (1, [URL], 1)
    assert peer.counted == [(Signal.REFUSED, Outcome.EVICTED, 1)]
    owners.suspect(URL)  # within the quiet period
    await _settle(owners)
    assert peer.evicted == [URL]


@pytest.mark.usefixtures("_short")
async def test_an_address_that_accepts_a_connection_is_left_to_its_session() -> None:
    peer = _Peer([False, True])  # refused once, then accepted: alive (paused, slow)
    owners = _owners(peer, bounds=Bounds(refused_s=0.02))
    owners.suspect(URL)
    await _settle(owners)
    assert peer.evicted == []
    assert peer.counted == [(Signal.REFUSED, Outcome.ALIVE, 0)]


@pytest.mark.usefixtures("_short")
async def test_an_owner_accepting_connections_but_answering_nothing_is_evicted() -> None:
    peer = _Peer([True, True, True])
    owners = _owners(peer)
    owners.unanswered(URL)
    await _settle(owners)
    assert peer.evicted == [URL]
    assert peer.counted == [(Signal.UNANSWERED, Outcome.EVICTED, 1)]


@pytest.mark.usefixtures("_short")
async def test_an_owner_answering_one_probe_within_the_bound_is_not_evicted() -> None:
    peer = _Peer([True, True, True], answers=[False, True])  # a stall shorter than the bound
    owners = _owners(peer, bounds=Bounds(unanswered_s=5.0))
    owners.unanswered(URL)
    await _settle(owners)
    assert (peer.probed, peer.evicted) == (2, [])
    assert peer.counted == [(Signal.UNANSWERED, Outcome.ALIVE, 0)]


@pytest.mark.usefixtures("_short")
async def test_an_owner_whose_connections_time_out_is_no_paused_one() -> None:
    peer = _Peer([True, None], answers=[False, False])  # cut off from this peer, or gone
    owners = _owners(peer, bounds=Bounds(unanswered_s=5.0))
    owners.unanswered(URL)
    await _settle(owners)
    assert peer.evicted == []
    assert peer.counted == [(Signal.UNANSWERED, Outcome.ALIVE, 0)]


@pytest.mark.usefixtures("_short")
async def test_an_owner_whose_connections_time_out_is_not_taken_for_dead() -> None:
    peer = _Peer([None])
    owners = _owners(peer, bounds=Bounds(refused_s=0.01))
    owners.suspect(URL)
    await _settle(owners)
    assert peer.evicted == []


@pytest.mark.usefixtures("_short")
async def test_no_bound_for_silence_leaves_a_paused_owner_to_its_session() -> None:
    peer = _Peer([True])
    owners = _owners(peer, bounds=Bounds(unanswered_s=0.0))
    owners.unanswered(URL)
    await _settle(owners)
    assert (peer.probed, peer.evicted, peer.counted) == (0, [], [])


@pytest.mark.usefixtures("_short")
async def test_a_removal_that_finds_no_member_left_is_counted_as_already_done() -> None:
    peer = _Peer([])
    peer.members = []  # another peer removed it first
    owners = _owners(peer, bounds=Bounds(refused_s=0.01))
    owners.suspect(URL)
    await _settle(owners)
    assert (peer.evicted, owners.evictions) == ([URL], 0)
    assert peer.counted == [(Signal.REFUSED, Outcome.ALREADY, 0)]


@pytest.mark.usefixtures("_short")
async def test_a_removal_that_fails_is_counted_as_failed() -> None:
    peer = _Peer([])
    peer.failure = BrokerUnavailable("the coordinator did not answer")
    owners = _owners(peer, bounds=Bounds(refused_s=0.01))
    owners.suspect(URL)
    await _settle(owners)
    assert (peer.evicted, owners.evictions) == ([URL], 0)
    assert peer.counted == [(Signal.REFUSED, Outcome.FAILED, 0)]


@pytest.mark.usefixtures("_short")
async def test_a_sibling_worker_is_never_suspected() -> None:
    peer = _Peer([])
    owners = _owners(peer, siblings=(URL,))
    owners.suspect(URL)
    owners.unanswered(URL)
    await _settle(owners)
    assert (peer.asked, peer.evicted) == (0, [])


@pytest.mark.usefixtures("_short")
async def test_once_closed_nobody_is_suspected_any_more() -> None:
    """A stopping instance closes this first: the owners it finds gone may be stopping with it
    (a whole deployment stopped), and an eviction under way would hold its exit back."""
    peer = _Peer([])
    owners = _owners(peer, bounds=Bounds(refused_s=0.01))
    await owners.close()
    owners.suspect(URL)
    owners.unanswered(URL)
    await _settle(owners)
    assert (peer.asked, peer.probed, peer.evicted) == (0, 0, [])


def test_every_signal_and_outcome_is_a_metric_label() -> None:
    assert (tuple(Signal), tuple(Outcome)) == (EVICTION_SIGNALS, EVICTION_OUTCOMES)
