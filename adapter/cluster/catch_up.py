"""Following the meta topic to what is written in it now, unless the change in question is
decided here: the one rule behind a write's routing, a read at a stream's tail and a bucket's
delete on an instance that does not take every slot's writes.

A change acknowledged by another owner a moment ago (a stream made, an append committed) may
not be followed here yet, and whatever is decided from this instance's catalog (where a write
goes, whether a read has reached the tail, whether a bucket is empty) must count it. The slot's
own writer decides everything of its slot, so a change local to this instance needs no catching
up: nothing acknowledged elsewhere can be missing. Otherwise the meta follower follows the
topic to its end as written now (`MetaFollower.seen_written`: bounded, concurrent waits share
one query).

One object serves the Coordinator (`adapter/cluster/coordinator.py`) and the stream and bucket
services, which the Coordinator is built on: they cannot ask it, so they all ask this.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from adapter.log.errors import LogUnavailable

log = logging.getLogger(__name__)


class Writing(Protocol):
    """The write slots, as far as catching up needs them."""

    def accepting(self, slot: int) -> bool: ...

    def accepting_all(self) -> bool: ...


class MetaCatchUp:
    """Follows the meta topic to now unless the slot in question is written here."""

    def __init__(
        self, writers: Writing, seen_written: Callable[[], Awaitable[None]] | None
    ) -> None:
        self.writers = writers
        self.seen_written = seen_written  # None: a process on its own log, nothing to follow

    def local(self, slot: int | None) -> bool:
        """Whether every change of `slot` (of any slot: None) is decided here."""
        if slot is None:
            return self.writers.accepting_all()
        return self.writers.accepting(slot)

    async def unless_local(self, slot: int | None, what: str) -> bool:
        """Whether every change of `slot` (of any slot: None) acknowledged before now is in
        this instance's view: at once when decided here, else once the follower has followed
        what is written now. False, logged with `what`, when that cannot be told within its
        bound (the broker unreachable, a transaction left open by a paused or dead owner)."""
        if self.seen_written is None or self.local(slot):
            return True
        try:
            await self.seen_written()
        except LogUnavailable as error:
            log.info("%s: cannot follow the meta topic to now: %s", what, error)
            return False
        return True
