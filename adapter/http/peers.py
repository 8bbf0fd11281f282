"""The HTTP clients to the other instances, and a stream asked of its owner as a reader here.

A read here of a stream another instance (or sibling worker) owns may ask that owner for it
as the reader asked here: a forwarded `GET ?offset=now` (an access there: it renews a sliding
TTL where expiry is decided) or a `HEAD` (not one). A sibling worker's read does so before it
is served (`adapter/cluster/coordinator.py`); any other instance's through the access relay
(`adapter/cluster/access_relay.py`), given the read's `Reader` by `reader_of`.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import SimpleNamespace

import aiohttp
from aiohttp import hdrs, web
from multidict import CIMultiDict

from adapter.cluster.access_relay import Reader
from adapter.cluster.coordinator import Described
from adapter.http.auth import GATE, QUERY_TOKEN, SUBJECT
from adapter.http.peer_headers import (
    CERTIFICATE_SUBJECT,
    FORWARDED,
    LAST_ACCESS,
    PEER_KEY,
    PEER_ONLY,
)
from adapter.protocol.offsets import parse_offset

log = logging.getLogger(__name__)

# Hop-by-hop headers, those aiohttp recomputes for the body it sends, and the peer-only ones:
# an instance sets its own (`forwarded`), never passing on a client's.
_NOT_COPIED = frozenset(
    h.lower()
    for h in (
        "Host",
        "Connection",
        "Keep-Alive",
        "Transfer-Encoding",
        "Content-Length",
        "TE",
        "Trailer",
        "Upgrade",
        "Proxy-Authorization",
        "Proxy-Authenticate",
        *PEER_ONLY,
    )
)


# Connections open at once to one peer (aiohttp's default for a whole client): each peer has a
# pool of its own, so requests stuck on one peer never wait for a connection to another.
PEER_CONNECTIONS = 100
REACH_READ_S = 2.0  # beyond the connect timeout: how long a liveness probe may take to answer


@dataclass(slots=True)
class Hop:
    """One request to a peer, as far as it went: `connected` once it had a connection, so its
    bytes may have been sent; until then the peer cannot have seen it."""

    connected: bool = False


async def _connected(
    _session: aiohttp.ClientSession, context: SimpleNamespace, _params: object
) -> None:
    if isinstance(hop := context.trace_request_ctx, Hop):
        hop.connected = True


def _tracing() -> aiohttp.TraceConfig:
    """Marks a request's `Hop` connected when it gets a connection, new or kept alive."""
    trace = aiohttp.TraceConfig()
    trace.on_connection_create_end.append(_connected)
    trace.on_connection_reuseconn.append(_connected)
    return trace


class PeerClients:
    """The HTTP clients to the other instances, opened on first use, closed at shutdown.

    Each peer has a session and a connection pool of its own, so a peer that stopped answering
    (paused, partitioned) holds only its own connections: forwards to every other peer go on.
    Opening a connection is bounded by `connect_timeout_s` (a peer that does not accept one in
    that time is not going to answer a write), the whole request by `timeout_s`, the write's
    deadline on its owner. A sibling worker of this process (`serve --workers N`) is reached
    over its Unix socket (`siblings`: its advertised URL to the socket's path); any other
    instance over TCP.
    """

    def __init__(
        self,
        timeout_s: float,
        siblings: Mapping[str, str] | None = None,
        connect_timeout_s: float = 1.0,
        peer_key: str = "",
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.timeout = aiohttp.ClientTimeout(total=timeout_s, sock_connect=connect_timeout_s)
        self.siblings = dict(siblings or {})
        self._headers = {PEER_KEY: peer_key} if peer_key else {}  # on every request
        # None: the system's trust store, names checked (`tls.peer_context`).
        self.tls: ssl.SSLContext | bool = True if tls is None else tls
        self._sessions: dict[str, aiohttp.ClientSession] = {}
        self._told_certificate = False  # a certificate that does not verify, logged once
        # Told of every forward that failed, and of every forward still unanswered after a
        # moment (adapter/cluster/dead_owners.py checks whether the owner there is gone).
        self.on_failure: Callable[[str], None] = lambda _url: None
        self.on_unanswered: Callable[[str], None] = lambda _url: None
        # Liveness probes go through sessions of their own: a probe waiting behind a pool full
        # of forwards to a busy peer would take that peer for silent.
        self._probes: dict[str, aiohttp.ClientSession] = {}

    def session(self, url: str, probe: bool = False) -> aiohttp.ClientSession:
        """The session for requests to the instance at `url` (its own pool of connections);
        `probe`: the one for its liveness probes, apart from its forwards."""
        sessions = self._probes if probe else self._sessions
        session = sessions.get(url)
        if session is None:
            path = self.siblings.get(url, "")
            connector = (
                aiohttp.UnixConnector(path, limit=PEER_CONNECTIONS)
                if path
                else aiohttp.TCPConnector(limit=PEER_CONNECTIONS, ssl=self.tls)
            )
            session = aiohttp.ClientSession(
                connector=connector,
                timeout=self.timeout,
                auto_decompress=False,
                trace_configs=[_tracing()],
                headers=self._headers,
            )
            sessions[url] = session
        return session

    async def answers(self, url: str, within_s: float | None = None) -> bool:
        """Whether the instance at `url` answers its liveness probe within `within_s` (default:
        the connect timeout plus `REACH_READ_S`), as a forward would reach it."""
        total = (self.timeout.sock_connect or 1.0) + REACH_READ_S if within_s is None else within_s
        timeout = aiohttp.ClientTimeout(total=total, sock_connect=self.timeout.sock_connect)
        try:
            async with self.session(url, probe=True).get(
                url + "/healthz", timeout=timeout
            ) as reply:
                await reply.read()
                return reply.status == 200
        except aiohttp.ClientConnectorCertificateError as error:
            # Something listens there and answered the handshake: the address is reached. Its
            # certificate failing verification is a configuration no owner moving can mend
            # (every instance checks with the same CA): said once, not taken as unreachable.
            if not self._told_certificate:
                self._told_certificate = True
                log.warning(
                    "the certificate at %s does not verify (%s): forwards to it will fail; "
                    "set tls_peer_ca_file to the deployment's CA",
                    url,
                    error.certificate_error,
                )
            return True
        except (aiohttp.ClientError, TimeoutError):
            return False

    async def close(self) -> None:
        for sessions in (self._sessions, self._probes):
            while sessions:  # a request still running may open one while another closes
                _, session = sessions.popitem()
                await session.close()


PEERS = web.AppKey("peers", PeerClients)


def reader_of(request: web.Request) -> Reader | None:
    """How a read (a `GET` of a stream) asks the stream's owner for it as this reader did; None
    for a read another instance asked here already (it is never asked on).

    The access relay may keep it for a quarter of the stream's TTL, for many streams: it holds
    only the route and the reader's credential, never the request itself (its transport, body
    and app)."""
    if request.method != "GET" or FORWARDED in request.headers:
        return None
    return _Renewal(request.app[PEERS], request.rel_url.raw_path, _credential(request)).tell


@dataclass(frozen=True, slots=True)
class _Renewal:
    """A read told to the stream's owner as an access of its own: `GET ?offset=now` with the
    reader's credential, which the owner checks again."""

    peers: PeerClients
    path: str
    credential: str | None  # the reader's `Authorization`

    async def tell(self, owner: str) -> None:
        headers = {FORWARDED: "1"}
        if self.credential is not None:
            headers[hdrs.AUTHORIZATION] = self.credential
        url, now = owner + self.path, {"offset": "now"}
        try:
            async with self.peers.session(owner).get(url, headers=headers, params=now) as reply:
                await reply.read()  # empty, or `[]` for a JSON stream
                status = reply.status
        except (aiohttp.ClientError, TimeoutError) as error:
            _failed("GET", self.path, owner, error)
            return
        if status >= 300 and status not in (404, 410):
            _failed("GET", self.path, owner, status)


def _credential(request: web.Request) -> str | None:
    """The reader's credential as an `Authorization` value: as it came in that header, or, when
    the reader put it in the URL (`?access_token=`), moved there."""
    credential = request.headers.get(hdrs.AUTHORIZATION)
    if credential is None and request.app[GATE].query_token:
        query = request.query.getall(QUERY_TOKEN, [])
        if len(query) == 1:  # two were refused already (RFC 6750: one way only)
            credential = f"Bearer {query[0]}"
    return credential


async def described_by(request: web.Request, owner: str) -> Described | None:
    """The stream per `owner`; None when it gave no usable answer.

    The owner checks the reader's credential again, as it does a forwarded write's: it is
    sent as it came in the `Authorization` header, or, when the reader put it in the URL
    (`?access_token=`), moved to that header (the URL asked for is the route alone)."""
    headers = _with_credential(request, forwarded(request, owner))
    url = owner + request.rel_url.raw_path
    method, params = ("GET", {"offset": "now"}) if request.method == "GET" else ("HEAD", {})
    session = request.app[PEERS].session(owner)
    try:
        async with session.request(method, url, headers=headers, params=params) as reply:
            await reply.read()  # empty, or `[]` for a JSON stream
            if reply.status in (404, 410):
                return Described(None, gone=reply.status == 410)
            token = reply.headers.get("Stream-Next-Offset")
            closed = reply.headers.get("Stream-Closed", "").lower() == "true"
            accessed = reply.headers.get(LAST_ACCESS, "")
    except (aiohttp.ClientError, TimeoutError) as error:
        _failed(method, request.path, owner, error)
        return None
    if reply.status >= 300:
        _failed(method, request.path, owner, reply.status)
    offset = parse_offset(token) if reply.status < 300 and token is not None else None
    last_access = int(accessed) if accessed.isdigit() else None
    return (
        Described(offset, closed, last_access_ms=last_access) if isinstance(offset, int) else None
    )


def _failed(method: str, path: str, owner: str, why: object) -> None:
    """A renewal (GET) the owner refused or did not answer is a warning: the stream may expire
    on its owner while it is read here. A failed HEAD only leaves the read to this catalog."""
    if method == "GET":
        log.warning("renewing %s at %s: %s", path, owner, why)
    else:
        log.debug("describing %s at %s: %s", path, owner, why)


def _with_credential(request: web.Request, headers: CIMultiDict[str]) -> CIMultiDict[str]:
    """`headers` with the reader's query token, if it sent one, as `Authorization`."""
    if hdrs.AUTHORIZATION not in headers and (credential := _credential(request)) is not None:
        headers[hdrs.AUTHORIZATION] = credential
    return headers


def forwarded(request: web.Request, url: str) -> CIMultiDict[str]:
    """The request's headers for the instance at `url`, marked forwarded; a sibling worker is
    also told the client certificate's subject (it cannot see the certificate)."""
    headers = copied(request.headers)
    # A coded request body is decoded before it is forwarded (`adapter/http/encoding.py`), so
    # it goes on uncoded; an answer stays as the owner coded it for the client's
    # Accept-Encoding.
    headers.popall(hdrs.CONTENT_ENCODING, None)
    headers[FORWARDED] = "1"
    subject = request.get(SUBJECT)
    if subject is not None and url in request.app[PEERS].siblings:
        headers[CERTIFICATE_SUBJECT] = subject
    return headers


def copied(headers: Mapping[str, str]) -> CIMultiDict[str]:
    """The headers passed on to or from another instance (hop-by-hop ones left out)."""
    return CIMultiDict((k, v) for k, v in headers.items() if k.lower() not in _NOT_COPIED)
