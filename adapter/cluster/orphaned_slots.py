"""Write slots nobody holds: the owners' group handed some out to no member.

The owners' group uses the cooperative protocol with static members. A member that rejoins
under its instance id is given the assignment the coordinator kept for it, without a
rebalance (KIP-345); when that kept assignment was the first round of a cooperative
rebalance (slots taken from members, none given yet), the second round, which would have
given the withheld slots to someone, never comes (so the members' logs read: a member fenced
and rejoined was assigned nothing, and no member was assigned the slots). Kafka sees nothing
wrong. It was measured
in `make faults` (`broker_pause`, two workers per instance): after the paused broker's
return two slots were held by no member for 72 s, every write to them answered 503, until
another member happened to leave.

An instance can see it from where it stands: a slot whose latest owner record is its own (it
was the last to take the slot) but which it no longer holds has gone to nobody, if no newer
owner record comes within `orphaned_s` (five owners' sessions: a new owner writes its record
as soon as its writer is ready, seconds after the handover, even through a broker's failover).
It then leaves the owners' group and joins again, which makes the group rebalance, every slot
handed out: one rebalance's pause of its own slots, against a slot that would otherwise wait
for the next membership change, however long. Not while it stands aside (peers cannot reach
it: it holds nothing on purpose).

Leaving makes the group rebalance only when the consumer is a member at that moment. One whose
session ended (its coordinator unreachable past the session, as while a lone broker restarts)
and that has not joined again has no member id: librdkafka then sends no LeaveGroup, and its
next join, a static member's, is answered with the assignment the coordinator kept for the
instance id, without a rebalance (measured against Kafka 4.3 with librdkafka 2.16: the client
logs `unsubscribe ... (leave group=true, has joined=false ...)`, the coordinator `Replacing
previously mapped member`). So the owners' consumer carries the rejoin out once it is a member
again (`SlotOwnership.rejoin`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection

log = logging.getLogger(__name__)

CHECK_S = 2.0  # how often the slots are looked at
SESSIONS = 5  # owners' sessions a slot may go without a newer owner record


class OrphanedSlots:
    def __init__(
        self,
        url: str,
        slots: int,
        owner_of: Callable[[int], str | None],
        held: Callable[[], Collection[int]],
        rejoin: Callable[[], None],
        orphaned_s: float,
        aside: Callable[[], bool] = lambda: False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = url  # this instance's advertised URL, as its owner records name it
        self.slots = slots
        self.owner_of = owner_of  # the URL of a slot's latest owner record
        self.held = held  # the slots the group assigned to this instance
        self.rejoin = rejoin
        self.orphaned_s = orphaned_s
        self.aside = aside
        self.clock = clock
        self._since: dict[int, float] = {}  # each slot left by us and not yet taken: since when
        self.rejoins = 0

    def check(self) -> bool:
        """Look at the slots once; whether this instance was asked to rejoin the group."""
        now = self.clock()
        if self.aside():
            self._since.clear()
            return False
        held = set(self.held())
        left = [s for s in range(self.slots) if self.owner_of(s) == self.url and s not in held]
        self._since = {slot: self._since.get(slot, now) for slot in left}
        orphaned = sorted(s for s, since in self._since.items() if now - since >= self.orphaned_s)
        if not orphaned:
            return False
        log.warning(
            "write slots %s have gone to no member of the owners' group for %.0fs since this "
            "instance held them: rejoining the group, so that it hands them out",
            orphaned,
            self.orphaned_s,
        )
        self._since.clear()
        self.rejoins += 1
        self.rejoin()
        return True

    async def run(self) -> None:
        while True:
            await asyncio.sleep(CHECK_S)
            self.check()
