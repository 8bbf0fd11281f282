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
from collections.abc import Mapping
from functools import partial

import aiohttp
from aiohttp import hdrs, web
from multidict import CIMultiDict

from adapter.cluster.access_relay import Reader
from adapter.cluster.coordinator import Described
from adapter.http.auth import GATE, QUERY_TOKEN, SUBJECT
from adapter.http.peer_headers import CERTIFICATE_SUBJECT, FORWARDED, LAST_ACCESS
from adapter.protocol.offsets import parse_offset

log = logging.getLogger(__name__)

# Hop-by-hop headers, and those aiohttp recomputes for the body it sends.
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
        CERTIFICATE_SUBJECT,
    )
)


class PeerClients:
    """The HTTP clients to the other instances, opened on first use, closed at shutdown.

    A sibling worker of this process (`serve --workers N`) is reached over its Unix socket
    (`siblings`: its advertised URL to the socket's path); any other instance over TCP.
    """

    def __init__(
        self,
        timeout_s: float,
        siblings: Mapping[str, str] | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self.siblings = dict(siblings or {})
        # None: the system's trust store, names checked (`tls.peer_context`).
        self.tls: ssl.SSLContext | bool = True if tls is None else tls
        self._sessions: dict[str, aiohttp.ClientSession] = {}

    def session(self, url: str) -> aiohttp.ClientSession:
        """The session for requests to the instance at `url`."""
        path = self.siblings.get(url, "")
        session = self._sessions.get(path)
        if session is None:
            connector = aiohttp.UnixConnector(path) if path else aiohttp.TCPConnector(ssl=self.tls)
            session = aiohttp.ClientSession(
                connector=connector, timeout=self.timeout, auto_decompress=False
            )
            self._sessions[path] = session
        return session

    async def close(self) -> None:
        while self._sessions:  # a request still running may open one while another closes
            _, session = self._sessions.popitem()
            await session.close()


PEERS = web.AppKey("peers", PeerClients)


def reader_of(request: web.Request) -> Reader | None:
    """How a read (a `GET` of a stream) asks the stream's owner for it as this reader did; None
    for a read another instance asked here already (it is never asked on)."""
    if request.method != "GET" or FORWARDED in request.headers:
        return None
    return partial(_ask_as_reader, request)


async def _ask_as_reader(request: web.Request, owner: str) -> None:
    await described_by(request, owner)


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
    if request.app[GATE].query_token and hdrs.AUTHORIZATION not in headers:
        query = request.query.getall(QUERY_TOKEN, [])
        if len(query) == 1:  # two were refused already (RFC 6750: one way only)
            headers[hdrs.AUTHORIZATION] = f"Bearer {query[0]}"
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
