"""Which operation class each route is, and on which bucket: what a request needs to be let in.

One rule covers the protocol's routes: GET and HEAD read, POST appends, PUT and DELETE
administer (bucket and stream create/delete, fork, snapshot publish/delete). A module whose
routes need something else says so where it registers them (`mark`): the web console's files
are public, its API reads. `tests/unit/test_route_needs` checks it all against a table of every
route the app serves, so a new route is a decision.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from adapter.auth.policy import Need
from adapter.auth.scopes import Operation
from adapter.protocol.errors import ProtocolError
from adapter.protocol.identifiers import fork_source, split_compat_path, validate_bucket_id

STREAM_ROUTES = frozenset({"/v1/stream/{path}", "/{bucket}/{stream}"})
PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/openapi.json"})
_BY_METHOD = {
    "GET": Operation.READ,
    "HEAD": Operation.READ,
    "POST": Operation.APPEND,
    "PUT": Operation.ADMIN,
    "DELETE": Operation.ADMIN,
}

NeedOf = Callable[[web.Request], Need]
# Routes registered with their own need; None: public (no token asked, none checked).
MARKED = web.AppKey("route_needs", dict[web.AbstractResource, NeedOf | None])


def mark(app: web.Application, route: web.AbstractRoute, need: NeedOf | None) -> None:
    """Record what `route`'s resource needs (every method on it), instead of the method rule."""
    assert route.resource is not None
    app.setdefault(MARKED, {})[route.resource] = need


def _marked(request: web.Request) -> tuple[bool, NeedOf | None]:
    resource = request.match_info.route.resource
    marked = request.app.get(MARKED, {})
    if resource is None or resource not in marked:
        return False, None
    return True, marked[resource]


def is_public(request: web.Request) -> bool:
    """Health checks, the API description, and routes marked public."""
    found, need = _marked(request)
    return request.path in PUBLIC_PATHS or (found and need is None)


def need_of(request: web.Request) -> Need:
    """What the request does; a path no route serves needs only a valid token (then 404)."""
    info = request.match_info
    if info.http_exception is not None:
        return Need(None)
    found, need = _marked(request)
    if need is not None:
        return need(request)
    if found:
        return Need(None)  # public: asked only by a caller that checks anyway
    operation = _BY_METHOD.get(request.method, Operation.ADMIN)  # an unknown method: fail closed
    return Need(operation, _stream_bucket(request))


def needs_of(request: web.Request) -> list[Need]:
    """Everything the request needs: what it does, and for a fork of another bucket's stream
    (a PUT naming it in `Stream-Forked-From`), reading that bucket."""
    need = need_of(request)
    source = _fork_source_bucket(request) if need.operation is Operation.ADMIN else None
    if source is None or source == need.bucket_id:
        return [need]
    return [need, Need(Operation.READ, source)]


def _fork_source_bucket(request: web.Request) -> str | None:
    """The bucket a stream creation forks from; None when it is no fork, or the header is
    malformed (the handler refuses that as it would)."""
    value = request.headers.get("Stream-Forked-From")
    resource = request.match_info.route.resource
    on_stream = resource is not None and resource.canonical in STREAM_ROUTES
    if request.method != "PUT" or value is None or not on_stream:
        return None
    try:
        return fork_source(value)[0]
    except ProtocolError:
        return None


def append_or_admin(request: web.Request) -> Need:
    """Fencing a stream: its writers (append) or its administrators (admin) may."""
    return Need(Operation.APPEND, _stream_bucket(request), or_else=Operation.ADMIN)


def admin_of_stream(request: web.Request) -> Need:
    """Trimming a stream removes data for every reader: its administrators (admin) only."""
    return Need(Operation.ADMIN, _stream_bucket(request))


def _stream_bucket(request: web.Request) -> str:
    info = request.match_info
    if "path" in info:
        return split_compat_path(info["path"])[0]
    return validate_bucket_id(info["bucket"])


def read_bucket(request: web.Request) -> Need:
    """Reading the bucket named by the route's `{b}`."""
    return Need(Operation.READ, validate_bucket_id(request.match_info["b"]))


def read_every_bucket(_: web.Request) -> Need:
    """Something about every bucket (their ids): a `read:*` scope."""
    return Need(Operation.READ, "")


def token_only(_: web.Request) -> Need:
    """Any valid token (what follows, a 404, says nothing about a bucket)."""
    return Need(None)
