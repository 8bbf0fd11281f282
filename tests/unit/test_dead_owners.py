"""An owner is evicted only once connections to its address are refused every time it is
asked, once per quiet period, and never a sibling worker."""

from __future__ import annotations

import asyncio

import pytest

from adapter.cluster import dead_owners
from adapter.cluster.dead_owners import CONFIRMATIONS, DeadOwners

URL = "http://10.0.0.2:4437"


class _Peer:
    def __init__(self, answers: list[bool]) -> None:
        self.answers = answers  # what each connection finds: True, something listens
        self.asked = 0
        self.evicted: list[str] = []

    async def listening(self, _url: str) -> bool:
        self.asked += 1
        return self.answers.pop(0) if self.answers else False

    async def evict(self, url: str) -> list[str]:
        self.evicted.append(url)
        return ["member"]


def _owners(peer: _Peer, siblings: tuple[str, ...] = ()) -> DeadOwners:
    return DeadOwners(peer.listening, peer.evict, siblings)


@pytest.fixture(autouse=True)
def _no_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dead_owners, "CONFIRM_PAUSE_S", 0.0)


async def _settle(owners: DeadOwners) -> None:
    for _ in range(20):
        await asyncio.sleep(0)
    await owners.close()


async def test_an_address_refusing_every_confirmation_is_evicted_once() -> None:
    peer = _Peer([])
    owners = _owners(peer)
    owners.suspect(URL)
    owners.suspect(URL)  # a check in flight: not a second one
    await _settle(owners)
    assert (peer.asked, peer.evicted, owners.evictions) == (CONFIRMATIONS, [URL], 1)
    owners.suspect(URL)  # within the quiet period
    await _settle(owners)
    assert peer.evicted == [URL]


async def test_an_address_that_accepts_a_connection_is_left_to_its_session() -> None:
    peer = _Peer([False, True])  # refused once, then accepted: alive (paused, slow)
    owners = _owners(peer)
    owners.suspect(URL)
    await _settle(owners)
    assert peer.evicted == []


async def test_a_sibling_worker_is_never_suspected() -> None:
    peer = _Peer([])
    owners = _owners(peer, siblings=(URL,))
    owners.suspect(URL)
    await _settle(owners)
    assert (peer.asked, peer.evicted) == (0, [])
