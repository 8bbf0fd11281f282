"""Where a write goes: handled here, forwarded to the slot's owner, or refused while it moves.

The decision is a pure function of what this instance knows (`decide`); the `Router` gathers
that knowledge for a slot (the services say which slot a request writes): whether this
instance accepts writes for it, and who owns it according to the owners topic (each new
owner of a slot commits its URL there with the slot's producer, right after fencing the
previous one; the follower keeps it in the catalog).
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass

from adapter.cluster.slot_writers import SlotWriters


@dataclass(frozen=True)
class Local:
    """This instance accepts writes for the slot: the request is handled here."""

    slot: int


@dataclass(frozen=True)
class Forward:
    """Another instance owns the slot: the request is proxied to its advertised `url`."""

    slot: int
    url: str


@dataclass(frozen=True)
class Moving:
    """Nobody can take the write now (a rebalance, or our own slot still initialising)."""

    slot: int


Route = Local | Forward | Moving

# For a write another instance forwarded here: (slot, the offset of the owner record it was
# routed on). Set for the request's task by the HTTP edge; the write is queued only while this
# instance's catalog still shows that record as the slot's latest (`Catalog.owner_mark`), so
# only the owner generation it was sent to carries it out. The forwarder relies on that: once
# the record is superseded, the generation it named is fenced, the log holds whatever it wrote,
# and the write may go on to the next owner, which must not be this instance again with it.
ROUTED_UNDER: ContextVar[tuple[int, int] | None] = ContextVar("routed_under", default=None)


def decide(slot: int, accepting: bool, owner_url: str | None, own_url: str) -> Route:
    """The route of a write for `slot`."""
    if accepting:
        return Local(slot)
    if owner_url is None or owner_url == own_url:
        return Moving(slot)
    return Forward(slot, owner_url)


class Router:
    """The slot of a write and its route; consulted by the HTTP edge before a handler runs."""

    def __init__(
        self, writers: SlotWriters, owner_of: Callable[[int], str | None], own_url: str
    ) -> None:
        self.writers = writers
        self.owner_of = owner_of
        self.own_url = own_url

    def route(self, slot: int) -> Route:
        return decide(slot, self.writers.accepting(slot), self.owner_of(slot), self.own_url)
