"""What one connection may take: time for a request's head and body, idle time, and a place.

aiohttp bounds idle keep-alive time (`keepalive_timeout`, also the time to the first request
of a connection) and nothing else: a head sent a byte at a time, an endless chunked body or a
body shorter than its `Content-Length` would hold a connection and its descriptor for ever.
`adapter/http/server.py` enforces these limits per connection; over `max_connections` (in
all) or `max_connections_per_address` (from one client address) a connection's request is
answered 503 `too_many_connections` and the connection closed, so the process refuses work
before it runs out of file descriptors. Another instance's connection (its request carries the
deployment's `peer_key_file` key) counts in all but never against its address: forwarded writes
come from a few addresses. Past `max_memory_bytes` of resident memory every
request but `/healthz` and `/readyz` is answered 503 `unavailable` until it is back under.
"""

from __future__ import annotations

import logging
import os
import resource
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from adapter.config import Settings, load_peer_key
from adapter.memory_limit import memory_cap

log = logging.getLogger(__name__)

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
# The most connections a listener lets wait for `accept` (listen(2) takes an unsigned short's
# worth; the kernel lowers it further to `net.core.somaxconn`).
MAX_BACKLOG = 65_535
# Descriptors kept for what is not a client connection: Kafka clients, files, refusals.
RESERVED_DESCRIPTORS = 512
# The highest descriptor numbers, never given to a client connection whatever the count: the
# parts that are not clients (Kafka clients reconnecting, the object store's files, requests
# forwarded to peers) take the lowest free number, so these stay theirs when they outgrow the
# reserve. A connection the kernel gives one of them is refused at once.
HEADROOM_DESCRIPTORS = 64


@dataclass(frozen=True)
class ConnectionLimits:
    header_timeout_s: float  # from a request's first byte to the end of its head
    body_timeout_s: float  # from the end of a request's head to the end of its body
    keepalive_timeout_s: float  # idle, between requests (and before the first)
    max_connections: int  # what the descriptor limit leaves room for, at most
    max_per_address: int  # 0: no limit
    max_memory_bytes: int = 0  # resident memory past which requests are refused; 0: none
    peer_key: str = ""  # the deployment's shared key (`peer_key_file`); "": none
    descriptor_ceiling: int = 0  # a connection on a descriptor this high is refused; 0: none

    @classmethod
    def of(cls, settings: Settings) -> ConnectionLimits:
        return cls(
            header_timeout_s=settings.header_timeout_ms / 1000,
            body_timeout_s=settings.body_timeout_ms / 1000,
            keepalive_timeout_s=settings.keepalive_timeout_ms / 1000,
            max_connections=within_descriptors(settings.max_connections),
            max_per_address=settings.max_connections_per_address,
            max_memory_bytes=memory_cap(settings.max_memory_bytes),
            peer_key=load_peer_key(settings),
            descriptor_ceiling=descriptor_ceiling(),
        )


CONNECTION_LIMITS = web.AppKey("connection_limits", ConnectionLimits)


def within_descriptors(wanted: int) -> int:
    """`wanted`, lowered to what the process's descriptor limit leaves room for."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return wanted
    room = max(soft - RESERVED_DESCRIPTORS, 1)
    if wanted == 0:
        return room
    if wanted > room:
        log.warning(
            "max_connections %d lowered to %d: RLIMIT_NOFILE is %d (%d kept for the rest)",
            wanted,
            room,
            soft,
            RESERVED_DESCRIPTORS,
        )
        return room
    return wanted


def descriptor_ceiling() -> int:
    """The lowest descriptor number a client connection may not take (0: no such number)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 0
    return max(soft - HEADROOM_DESCRIPTORS, 1)


def listen_backlog(max_connections: int) -> int:
    """How many connections may wait to be accepted: as many as would be admitted. A fuller
    queue drops new connections' handshakes, and the client retries them for seconds (1, 3,
    7, 15 s ...) or sees its connection reset, while the loop is busy with the others.
    aiohttp's default is 128, a burst of 1,000 clients overflows it."""
    return min(max_connections or MAX_BACKLOG, MAX_BACKLOG)


class ConnectionCounts:
    """The connections admitted now, in all and per client address."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self.total = 0
        self.per_address: Counter[str] = Counter()

    def refusal(self, address: str, descriptor: int = -1) -> str | None:
        """Why a new connection on `descriptor` is refused at once, or None: past the
        descriptors kept in reserve, or over `max_connections`."""
        ceiling = self.limits.descriptor_ceiling
        if ceiling and descriptor >= ceiling:
            return "this instance is short of file descriptors; retry"
        if self.limits.max_connections and self.total >= self.limits.max_connections:
            return f"over {self.limits.max_connections} connections to this instance; retry"
        return None

    def over_address(self, address: str) -> str | None:
        """Why a new connection from `address` is over its address's limit, or None."""
        per_address = self.limits.max_per_address
        if per_address and self.per_address[address] >= per_address:
            return f"over {per_address} connections from one client address; retry"
        return None

    def full(self, handshaking: int) -> bool:
        """Whether the connections admitted and the `handshaking` ones fill `max_connections`."""
        most = self.limits.max_connections
        return bool(most) and self.total + handshaking >= most

    def admit(self, address: str) -> None:
        self.total += 1
        self.per_address[address] += 1

    def release(self, address: str) -> None:
        self.total -= 1
        self._leave(address)

    def admit_unaddressed(self) -> None:
        """A connection over its address's limit that may be another instance's (its first
        request says): counted in all only, so `max_connections` still bounds such ones."""
        self.total += 1

    def peer(self, address: str) -> None:
        """An admitted connection turned out to be another instance's: off its address's
        count, in all only."""
        self._leave(address)

    def release_peer(self) -> None:
        self.total -= 1

    def _leave(self, address: str) -> None:
        self.per_address[address] -= 1
        if not self.per_address[address]:
            del self.per_address[address]


class ResidentMemory:
    """Whether this process's resident memory is at or past `cap` (0: never), read from
    `/proc/self/statm` at most every `every_s` (a read costs microseconds; requests are many)."""

    def __init__(
        self, cap: int, every_s: float = 0.05, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.cap, self.every_s, self.clock = cap, every_s, clock
        self._read_at = -every_s
        self._over = False

    def over(self) -> bool:
        if not self.cap:
            return False
        now = self.clock()
        if now - self._read_at >= self.every_s:
            self._read_at = now
            self._over = resident_bytes() >= self.cap
        return self._over


def resident_bytes() -> int:
    """This process's resident set size (Linux)."""
    with open("/proc/self/statm", "rb") as statm:
        return int(statm.read().split()[1]) * PAGE_SIZE
