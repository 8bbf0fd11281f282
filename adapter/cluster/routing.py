"""Where a write goes: handled here, forwarded to the slot's owner, or refused while it moves.

The decision is a pure function of what this instance knows (`decide`); the `Router` gathers
that knowledge for a slot (the services say which slot a request writes): whether this
instance accepts writes for it, and who owns it according to the owners' group.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from adapter.cluster.slot_writers import SlotWriters
from topology.errors import TopologyError

log = logging.getLogger(__name__)

REFRESH_MIN_S = 0.5  # at most two group descriptions a second, however many misses


@dataclass(frozen=True)
class Local:
    slot: int


@dataclass(frozen=True)
class Forward:
    slot: int
    url: str


@dataclass(frozen=True)
class Moving:
    """Nobody can take the write now (a rebalance, or our own slot still initialising)."""

    slot: int


Route = Local | Forward | Moving


def decide(slot: int, accepting: bool, owner_url: str | None, own_url: str) -> Route:
    """The route of a write for `slot`."""
    if accepting:
        return Local(slot)
    if owner_url is None or owner_url == own_url:
        return Moving(slot)
    return Forward(slot, owner_url)


Members = list[tuple[str, list[int]]]


def owners_of(members: Members) -> dict[int, str]:
    """slot -> the advertised URL of the member holding it."""
    return {slot: url for url, slots in members for slot in slots}


class OwnerDirectory:
    """Who owns each slot, from the owners' group description; cached, refreshed on a miss."""

    def __init__(self, describe: Callable[[], Awaitable[Members]]) -> None:
        self._describe = describe
        self._owners: dict[int, str] = {}
        self._refreshed_at = float("-inf")
        self._lock = asyncio.Lock()

    async def owner(self, slot: int, fresh: bool = False) -> str | None:
        if fresh or slot not in self._owners:
            await self.refresh()
        return self._owners.get(slot)

    def forget(self, slot: int) -> None:
        """The cached owner did not answer or refused: ask the group again next time."""
        self._owners.pop(slot, None)

    async def refresh(self) -> None:
        loop = asyncio.get_running_loop()
        async with self._lock:
            if loop.time() - self._refreshed_at < REFRESH_MIN_S:
                return
            self._refreshed_at = loop.time()
            try:
                self._owners = owners_of(await self._describe())
            except TopologyError as error:
                log.warning("describing the owners' group: %s", error)


class Router:
    """The slot of a write and its route; consulted by the HTTP edge before a handler runs."""

    def __init__(self, writers: SlotWriters, owners: OwnerDirectory, own_url: str) -> None:
        self.writers = writers
        self.owners = owners
        self.own_url = own_url

    async def route(self, slot: int) -> Route:
        if self.writers.accepting(slot):
            return Local(slot)
        url = await self.owners.owner(slot)
        if url == self.own_url:  # the group may have moved on since the last description
            url = await self.owners.owner(slot, fresh=True)
        return decide(slot, self.writers.accepting(slot), url, self.own_url)
