"""Whether this instance can be reached at its advertised URL, and what it does when it cannot.

Peers forward writes to a slot's owner at the URL it advertises. An instance reachable by Kafka
but not at that URL (an address nobody listens on, a firewall, a port not published) would keep
its slots, and every write to them through another instance would be refused. So each instance
asks its own advertised URL (`/healthz`) every `CHECK_EVERY_S`, through the client its peers'
forwards use (the same connect timeout). After `FAILED_CHECKS` failures in a row it is
**unreachable**: readiness says so (the `ownership` check's detail and `advertised_reachable`)
and so does the `durable_kafka_advertised_reachable` gauge, and it steps aside from the owners'
group (`SlotOwnership.step_aside`), so its slots move to instances that can be reached. At the
first check that succeeds it joins again.

It steps aside only while another owner of slots answers at its own advertised URL (asked from
here): a lone instance writes for itself and needs no peer to reach it, and when no other owner
answers either (every instance given a wrong address, or the others gone) stepping aside would
leave the slots without an owner that can be reached, so it stays or joins again.

What this does not see: a split in which the instance still reaches its own address but its
peers do not (each peer then refuses writes it cannot deliver at once, as not written).

Why the instance checks itself rather than being reported by peers: the peers cannot tell it
anything over the address they cannot reach, and a report through Kafka would need a writer for
a topic nobody owns; the instance's own view of its address is the one fact it can act on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

CHECK_EVERY_S = 1.0
FAILED_CHECKS = 3  # failures in a row that make the instance unreachable


class AdvertisedReach:
    """Checks the advertised URL (`probe`), and steps aside while it does not answer."""

    def __init__(
        self,
        url: str,
        probe: Callable[[], Awaitable[bool]],
        peers_answer: Callable[[], Awaitable[bool]],
        step_aside: Callable[[bool], None],
        on_change: Callable[[], None] = lambda: None,
    ) -> None:
        self.url = url
        self.probe = probe
        self.peers_answer = peers_answer  # another owner of slots answers at its URL
        self.step_aside = step_aside
        self.on_change = on_change  # readiness is told
        self.failures = 0
        self.reachable = True
        self.aside = False

    async def run(self) -> None:
        while True:
            await self.check()
            await asyncio.sleep(CHECK_EVERY_S)

    async def check(self) -> None:
        """One check; steps aside, or back, when that changes what it should do."""
        answered = await self.probe()
        self.failures = 0 if answered else self.failures + 1
        reachable = answered or self.failures < FAILED_CHECKS
        if reachable != self.reachable:
            self.reachable = reachable
            if reachable:
                log.warning("the advertised URL %s answers again", self.url)
            else:
                log.error(
                    "the advertised URL %s cannot be reached: peers cannot forward here", self.url
                )
            self.on_change()
        aside = not reachable and await self.peers_answer()
        if aside != self.aside:
            self.aside = aside
            log.warning("%s the owners' group", "leaving" if aside else "joining again")
            self.step_aside(aside)
