"""The headers instances add to the requests they send each other (forwarded writes, reads asked
of an owner), who may send them, and the forward id of an append another instance forwarded
here.

They are believed only from a peer: a sibling worker (over its Unix socket, which only this
process's workers reach) or, with `peer_key_file` set, a request carrying the deployment's
key. From anyone else a request naming one is refused 403 before anything is done
(`peer_headers_middleware`): a client could otherwise mark its write forwarded (never
forwarded again, no catch-up first), route it on a forged owner record (refused 503 for
ever) or tag its records with a forward id of its choosing. Without `peer_key_file` nothing
tells a peer's TCP connection from a client's, so they are believed from anyone; what a
client gains by them then is listed in docs/operations.md ("Peer headers").
"""

from __future__ import annotations

import hmac
import re
import socket
from collections.abc import Awaitable
from typing import Final

from aiohttp import web
from aiohttp.typedefs import Middleware

from adapter.http.render import Handler
from adapter.protocol.errors import ErrorCode, ProtocolError

FORWARDED: Final = "Durable-Kafka-Forwarded"  # never forwarded again
FORWARD_ID: Final = "Durable-Kafka-Forward-Id"  # an append's id, written on its records
# On a forwarded write: the offset of the slot's owner record the forwarder routed it on; the
# owner carries the write out only while that record is its latest (`ROUTED_UNDER`).
OWNER_MARK: Final = "Durable-Kafka-Owner-Mark"
# On a sibling worker's synchronising read (`serve --workers`): the owner's last access to the
# stream (ms since the epoch), which the sibling adopts when later than its own.
LAST_ACCESS: Final = "Durable-Kafka-Last-Access"
# On a request a sibling worker forwards over its Unix socket: the subject (`CN=...`) of the
# client certificate the request came with, which only the worker it entered could see.
# Believed only from a Unix socket (siblings alone reach it); never copied from a client.
CERTIFICATE_SUBJECT: Final = "Durable-Kafka-Certificate-Subject"
# On every request an instance sends another, with `peer_key_file` set: the deployment's shared
# key. A connection whose request carries it is a peer's, not counted per client address
# (`adapter/http/server.py`); never passed on, never logged.
PEER_KEY: Final = "Durable-Kafka-Peer-Key"
# On an owner's success answer to a forwarded write: what the write changed, which the
# forwarder waits to see before it relays the answer (`adapter/cluster/effects.py`). Taken off
# the answer before the client gets it.
EFFECT: Final = "Durable-Kafka-Effect"
_FORWARD_ID_SHAPE: Final = re.compile("[0-9a-f]{32}")
PEER_ONLY: Final = (
    FORWARDED,
    FORWARD_ID,
    OWNER_MARK,
    LAST_ACCESS,
    CERTIFICATE_SUBJECT,
    PEER_KEY,
    EFFECT,
)


def peer_headers_middleware(peer_key: str) -> Middleware:
    """403 for a request naming a peer-only header unless it comes from a peer; nothing to
    check without a key (see the module's docstring)."""

    # Not a coroutine: it checks, then hands back the handler's awaitable, so no frame of it
    # stays suspended beside a long-lived request (a parked SSE session or long-poll).
    @web.middleware
    def peer_headers(request: web.Request, handler: Handler) -> Awaitable[web.StreamResponse]:
        if peer_key:
            named = next((name for name in PEER_ONLY if name in request.headers), None)
            if named is not None and not from_a_peer(request, peer_key):
                raise ProtocolError(
                    ErrorCode.FORBIDDEN,
                    f"{named} is sent only by this deployment's instances to each other",
                )
        return handler(request)

    return peer_headers


def refused_from_outside(peer_key: str) -> frozenset[ErrorCode]:
    """What `peer_headers_middleware` may answer on every route (`/openapi.json` lists it)."""
    return frozenset({ErrorCode.FORBIDDEN}) if peer_key else frozenset()


def from_a_peer(request: web.BaseRequest, peer_key: str) -> bool:
    """Whether the request came from a sibling worker's Unix socket or carries `peer_key`."""
    sock = request.transport.get_extra_info("socket") if request.transport else None
    if sock is not None and sock.family == socket.AF_UNIX:
        return True
    return carries_key(request, peer_key)


def carries_key(request: web.BaseRequest, peer_key: str) -> bool:
    """Whether the request's `PEER_KEY` is `peer_key` (never, when that is empty), compared in
    constant time (it is a secret). A value that is no UTF-8 (aiohttp keeps such bytes as
    surrogates) is not the key."""
    sent = request.headers.get(PEER_KEY)
    if not peer_key or sent is None:
        return False
    try:
        return hmac.compare_digest(sent.encode(), peer_key.encode())
    except UnicodeEncodeError:
        return False


def owner_mark_of(request: web.Request) -> int | None:
    """The owner mark a forwarded write was routed on (None: not forwarded, or sent by an
    instance that names none)."""
    value = request.headers.get(OWNER_MARK)
    if value is None or FORWARDED not in request.headers:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def forward_id_of(request: web.Request) -> str | None:
    """The forward id of an append another instance forwarded here (None for any other)."""
    value = request.headers.get(FORWARD_ID)
    if value is None or FORWARDED not in request.headers:
        return None
    return value if _FORWARD_ID_SHAPE.fullmatch(value) else None
