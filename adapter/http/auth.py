"""Authentication and authorization at the edge: bearer token → principal → scope check.

Runs after the errors middleware (so refusals are JSON) and before anything reads a body or
forwards a write. `/healthz` and `/readyz` stay open; a preflight is answered before it.
Every other route needs what its route table entry says (`route_needs.needs_of`: by default
the method's operation class; a fork of another bucket's stream also needs to read that
bucket).
A token comes from `Authorization: Bearer`, or from `?access_token=` only when
`auth_query_token` is on; it is never put in a message or a log line. Without a token, a
client certificate listed in `[auth.certificates]` is the principal (verified by the TLS
handshake; `adapter/auth/certificates.py`); a sibling worker passes its subject on with a
write it forwards over its Unix socket, where only siblings connect.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from aiohttp import web
from aiohttp.typedefs import Middleware

from adapter.auth.certificates import CertificatePrincipals, Subject
from adapter.auth.policy import Need, Policy, Verdict
from adapter.auth.principals import InvalidToken, Principal, UnknownKey, Verifier
from adapter.auth.scopes import Operation, needed
from adapter.http.observe import METRICS, add_log_fields
from adapter.http.peer_headers import CERTIFICATE_SUBJECT, FORWARDED
from adapter.http.render import Handler
from adapter.http.route_needs import is_public, needs_of
from adapter.protocol.errors import ErrorCode, ProtocolError

REALM = 'Bearer realm="durable-kafka"'
QUERY_TOKEN = "access_token"


class KeySource(Protocol):
    """Where a verifier's keys come from when they can change while the instance runs."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def refetch(self) -> bool:
        """Fetch the keys again now (rate-limited) for a token naming an unknown key; True
        when a new set is in and the token is worth checking again."""
        ...


@dataclass(frozen=True)
class Gate:
    """How this instance checks callers; `verifier` None means `auth_mode = "off"`."""

    verifier: Verifier | None
    policy: Policy = field(default_factory=Policy)
    conceal: bool = False
    query_token: bool = False
    clock: Callable[[], float] = field(default=time.time)
    certificates: CertificatePrincipals = field(default_factory=lambda: CertificatePrincipals({}))
    keys: KeySource | None = None  # jwt mode with a JWKS URL


GATE = web.AppKey("auth_gate", Gate)
PRINCIPAL = web.RequestKey("principal", Principal)
# The subject of the client certificate that is the request's principal (none: a token's).
SUBJECT = web.RequestKey("certificate_subject", str)


def principal_of(request: web.Request) -> Principal | None:
    if request.app[GATE].verifier is None:
        return None  # auth is off: no request has one (asking would raise a KeyError inside)
    return request.get(PRINCIPAL)


def seconds_left(request: web.Request) -> float | None:
    """How long the caller's credential stays valid (None: no credential, or no expiry)."""
    principal = principal_of(request)
    return None if principal is None else principal.seconds_left(request.app[GATE].clock())


def auth_middleware(gate: Gate) -> Middleware:
    # Not a coroutine: it checks, then hands back the handler's awaitable, so no frame of it
    # stays suspended beside a long-lived request (a parked SSE session or long-poll). Only a
    # token of a key not yet known waits (for the key set's refetch), in a coroutine.
    @web.middleware
    def authenticate(request: web.Request, handler: Handler) -> Awaitable[web.StreamResponse]:
        verifier = gate.verifier
        if verifier is None or is_public(request):
            return handler(request)
        try:
            principal = _principal(request, gate, verifier)
        except UnknownKey as error:
            if gate.keys is None:
                raise _invalid(request, error) from None
            return _after_refetch(request, handler, gate, verifier, error)
        _let_in(request, gate, principal)
        return handler(request)

    return authenticate


async def _after_refetch(
    request: web.Request, handler: Handler, gate: Gate, verifier: Verifier, unknown: UnknownKey
) -> web.StreamResponse:
    """A token of a key the verifier does not know: the key set is fetched again (at most
    so often, `KeySource.refetch`), then the token checked once more."""
    assert gate.keys is not None
    token = _token(request, gate)
    assert token is not None  # only a token names a key
    if not await gate.keys.refetch():
        raise _invalid(request, unknown)
    try:
        principal = verifier.verify(token, gate.clock())
    except InvalidToken as error:
        raise _invalid(request, error) from None
    _let_in(request, gate, principal)
    return await handler(request)


def _let_in(request: web.Request, gate: Gate, principal: Principal | None) -> None:
    """Judge every need of the request (401 or 403 if one is not met), then note who asked."""
    for need in needs_of(request):
        _judge(request, gate, principal, need)
    if principal is not None:
        request[PRINCIPAL] = principal
        add_log_fields(request, principal=principal.name)


def _judge(request: web.Request, gate: Gate, principal: Principal | None, need: Need) -> None:
    """Let the request in for `need`, or refuse it: 401 without a credential, else 403."""
    verdict = gate.policy.decide(principal, need)
    if verdict is Verdict.UNAUTHENTICATED:
        _count_failure(request, "missing")
        raise ProtocolError(
            ErrorCode.UNAUTHORIZED,
            _needs(gate),
            headers={"WWW-Authenticate": REALM},
        )
    if verdict is Verdict.INSUFFICIENT_SCOPE:
        _count_failure(request, "insufficient_scope")
        raise _refusal(gate, principal, need)


def _needs(gate: Gate) -> str:
    if gate.certificates.by_subject:
        return "this request needs a bearer token or a client certificate"
    return "this request needs a bearer token"


def _principal(request: web.Request, gate: Gate, verifier: Verifier) -> Principal | None:
    """Who the request's token or certificate names; 401 for an invalid token. `UnknownKey`
    passes up: a token of a key the verifier may learn by fetching the key set again."""
    token = _token(request, gate)
    if token is None:
        return _certificate_principal(request, gate.certificates)
    try:
        return verifier.verify(token, gate.clock())
    except UnknownKey:
        raise
    except InvalidToken as error:
        raise _invalid(request, error) from None


def _invalid(request: web.Request, error: InvalidToken) -> ProtocolError:
    _count_failure(request, error.reason)
    return ProtocolError(
        ErrorCode.UNAUTHORIZED,
        f"invalid bearer token: {error}",
        headers={"WWW-Authenticate": f'{REALM}, error="invalid_token"'},
    )


def _certificate_principal(
    request: web.Request, certificates: CertificatePrincipals
) -> Principal | None:
    """The principal of the client's verified certificate, or of the one a sibling worker
    saw on the request it forwarded here; None when there is none or it is not listed."""
    if not certificates.by_subject or request.transport is None:
        return None
    peer: dict[str, Subject] | None = request.transport.get_extra_info("peercert")
    if peer:
        principal = certificates.principal(peer.get("subject", ()))
    elif _from_sibling(request):
        principal = certificates.by_subject.get(request.headers[CERTIFICATE_SUBJECT])
    else:
        return None
    if principal is not None:
        request[SUBJECT] = principal.name
    return principal


def _from_sibling(request: web.Request) -> bool:
    """A forwarded request naming a certificate, come over this worker's Unix socket."""
    if FORWARDED not in request.headers or CERTIFICATE_SUBJECT not in request.headers:
        return False
    sock = request.transport.get_extra_info("socket") if request.transport else None
    return sock is not None and sock.family == socket.AF_UNIX


def _token(request: web.Request, gate: Gate) -> str | None:
    header = request.headers.get("Authorization")
    query = request.query.getall(QUERY_TOKEN, []) if gate.query_token else []
    if (header is not None and query) or len(query) > 1:
        raise ProtocolError(ErrorCode.BAD_REQUEST, "send the token one way only (RFC 6750)")
    if query:
        return query[0]
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        _count_failure(request, "malformed")
        raise ProtocolError(
            ErrorCode.UNAUTHORIZED,
            "Authorization must be 'Bearer <token>'",
            headers={"WWW-Authenticate": f'{REALM}, error="invalid_token"'},
        )
    return token.strip()


def _count_failure(request: web.Request, reason: str) -> None:
    metrics = request.app.get(METRICS)
    if metrics is not None:
        metrics.auth_failures.labels(reason).inc()


def _refusal(gate: Gate, principal: Principal | None, need: Need) -> ProtocolError:
    """403 naming the scope needed; 404 instead when concealing from a caller who may not
    even read the bucket (it learns nothing about what exists there)."""
    operation, bucket_id = need.operation or Operation.ADMIN, need.bucket_id or ""
    if gate.conceal and not (principal and principal.may(Operation.READ, bucket_id)):
        return ProtocolError(ErrorCode.NOT_FOUND, "no such resource")
    scope = needed(operation, bucket_id)
    return ProtocolError(
        ErrorCode.INSUFFICIENT_SCOPE,
        f"the token lacks the scope {scope}",
        headers={"WWW-Authenticate": f'{REALM}, error="insufficient_scope", scope="{scope}"'},
    )
