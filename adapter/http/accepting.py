"""A listener that accepts every waiting connection each time its socket is readable.

uvloop (libuv) accepts one connection per turn of the event loop. A loop busy with appends
turns every 10-20 ms, so a burst of 1,000 new clients waited in the kernel's accept queue
for up to 10 s (measured: the queue at 780, draining at 40-100 connections a second, while
requests on open connections were answered in under half a second), and clients gave up or
saw p99 latencies of seconds. This site owns its listening socket and, when it is readable,
accepts up to `ACCEPTS_PER_TURN` connections, handing each to the loop with
`connect_accepted_socket`; the socket stays readable while more wait, so the next turns take
the rest. A turn's share is bounded because each connection's set-up (its protocol, its
handler task) runs before the loop polls again: 3,000 clients connecting at once, taken in
one turn, held every open connection's answer for a quarter of a second of CPU.

Over HTTPS a handshake must finish within `handshake_timeout_s` (the head's deadline,
`header_timeout_ms`) rather than asyncio's default of 60 s, so connections opened and left
silent are closed as soon as an unfinished head would be. Handshakes under way count against
`max_connections` with the connections admitted: a connection accepted while they fill it is
closed at once (before its handshake, it cannot be told why), since each holds a descriptor
as much as an admitted connection does.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import ssl
from typing import Any

from aiohttp import web

from adapter.http.aiohttp_internals import set_site_server
from adapter.http.connections import ConnectionCounts
from adapter.http.server import ProtocolServer

log = logging.getLogger(__name__)

# 64 a turn: a loop turning every 10-20 ms while busy still accepts thousands a second.
ACCEPTS_PER_TURN = 64
# Out of descriptors (or kernel memory): stop accepting for a moment rather than spin on a
# readable socket that cannot be served; the kernel queue holds the connections meanwhile.
RESOURCE_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
RESOURCE_PAUSE_S = 1.0


class Acceptor:
    """The listening sockets' reader: what `asyncio.Server` is to aiohttp's sites (`close`,
    `sockets`), with every waiting connection accepted at once."""

    def __init__(
        self,
        socks: list[socket.socket],
        factory: Any,
        tls: ssl.SSLContext | None,
        handshake_timeout_s: float | None,
        counts: ConnectionCounts | None = None,
    ) -> None:
        self.socks = socks
        self.counts = counts  # the connections admitted, with which handshakes count
        self.factory = factory
        self.tls = tls
        self.handshake_timeout_s = handshake_timeout_s if tls is not None else None
        self.loop = asyncio.get_running_loop()
        self.connecting: set[asyncio.Task[Any]] = set()
        self.closed = False
        for sock in socks:
            sock.setblocking(False)
            self.loop.add_reader(sock.fileno(), self._readable, sock)

    @property
    def sockets(self) -> tuple[socket.socket, ...]:
        return () if self.closed else tuple(self.socks)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for sock in self.socks:
            self.loop.remove_reader(sock.fileno())
            sock.close()

    def _readable(self, sock: socket.socket) -> None:
        for _ in range(ACCEPTS_PER_TURN):
            try:
                conn, _ = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:
                if error.errno not in RESOURCE_ERRORS:
                    log.warning("accept on %s: %s", sock.getsockname(), error)
                    return
                log.warning("accept paused for %.0f s: %s", RESOURCE_PAUSE_S, error)
                self.loop.remove_reader(sock.fileno())
                self.loop.call_later(RESOURCE_PAUSE_S, self._resume, sock)
                return
            self._connect(conn)

    def _resume(self, sock: socket.socket) -> None:
        if not self.closed:
            self.loop.add_reader(sock.fileno(), self._readable, sock)

    def _connect(self, conn: socket.socket) -> None:
        if (
            self.tls is not None
            and self.counts is not None
            and self.counts.full(len(self.connecting))
        ):
            log.debug("connection closed: %d handshakes fill max_connections", len(self.connecting))
            conn.close()
            return
        conn.setblocking(False)
        connecting = self.loop.connect_accepted_socket(
            self.factory, conn, ssl=self.tls, ssl_handshake_timeout=self.handshake_timeout_s
        )
        task = self.loop.create_task(connecting)
        self.connecting.add(task)
        task.add_done_callback(lambda done: self._connected(done, conn))

    def _connected(self, task: asyncio.Task[Any], conn: socket.socket) -> None:
        self.connecting.discard(task)
        if task.cancelled():
            conn.close()
            return
        error = task.exception()
        if error is not None:  # a failed TLS handshake, a client gone at once
            log.debug("connection not set up: %s", error)
            conn.close()


class AcceptingSite(web.BaseSite):
    """An aiohttp site on a TCP address or an already bound socket, served by an `Acceptor`."""

    def __init__(
        self,
        runner: web.BaseRunner,
        *,
        address: tuple[str | None, int] | None = None,
        sock: socket.socket | None = None,
        backlog: int = 128,
        reuse_port: bool = False,
        tls: ssl.SSLContext | None = None,
        handshake_timeout_s: float | None = None,
    ) -> None:
        super().__init__(runner, ssl_context=tls, backlog=backlog)
        if (address is None) == (sock is None):
            raise ValueError("an AcceptingSite takes an address or a socket")
        self.runner, self.tls, self.backlog = runner, tls, backlog
        self.acceptor: Acceptor | None = None
        self.address, self.given, self.reuse_port = address, sock, reuse_port
        self.handshake_timeout_s = handshake_timeout_s

    @property
    def name(self) -> str:
        scheme = "https" if self.tls else "http"
        sockets = self.acceptor.sockets if self.acceptor is not None else ()
        host, port = sockets[0].getsockname()[:2] if sockets else (self.address or ("", 0))
        return f"{scheme}://{host}:{port}"

    async def start(self) -> None:
        await super().start()  # registers the site with its runner
        server = self.runner.server
        assert server is not None
        socks = [self.given] if self.given is not None else self._listen()
        counts = server.counts if isinstance(server, ProtocolServer) else None
        self.acceptor = Acceptor(socks, server, self.tls, self.handshake_timeout_s, counts)
        set_site_server(self, self.acceptor)  # closed by stop()

    def _listen(self) -> list[socket.socket]:
        """A listening socket per address `host` names (every interface for "" or None), as
        `loop.create_server` binds them."""
        assert self.address is not None
        host, port = self.address
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        socks: list[socket.socket] = []
        try:
            for family, kind, proto, _, sockaddr in dict.fromkeys(infos):
                sock = socket.socket(family, kind, proto)
                socks.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if self.reuse_port:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(sockaddr)
                sock.listen(self.backlog)
        except OSError:
            for sock in socks:
                sock.close()
            raise
        return socks
