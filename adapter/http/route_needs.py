"""What a request needs to be let in: an operation class on a bucket, from its route's `Op`.

The protocol's routes follow one rule (`by_method`): GET and HEAD read, POST appends, PUT
and DELETE administer (bucket and stream create/delete, fork, snapshot publish/delete). A
route that needs something else says so in its table entry (`adapter/http/routes.py`): the
web console's files are public, its API reads; a fence needs append or admin, a trim admin.
"""

from __future__ import annotations

from aiohttp import web

from adapter.auth.policy import Need
from adapter.auth.scopes import Operation
from adapter.http.route_table import ROUTES, Owner, op_of, public_paths
from adapter.protocol.errors import ProtocolError
from adapter.protocol.identifiers import fork_source, split_compat_path, validate_bucket_id

_BY_METHOD = {
    "GET": Operation.READ,
    "HEAD": Operation.READ,
    "POST": Operation.APPEND,
    "PUT": Operation.ADMIN,
    "DELETE": Operation.ADMIN,
}


def is_public(request: web.Request) -> bool:
    """A public route's request; or a method a public path does not serve (405, no token)."""
    op = op_of(request)
    if op is not None:
        return op.need is None
    table = request.app.get(ROUTES)
    return table is not None and request.path in public_paths(table)


def need_of(request: web.Request) -> Need:
    """What the request does; a path no route serves needs only a valid token (then 404)."""
    op = op_of(request)
    if request.match_info.http_exception is not None or op is None or op.need is None:
        return Need(None)  # public: asked only by a caller that checks anyway
    return op.need(request)


def by_method(request: web.Request) -> Need:
    """The protocol's rule: the method's operation on the route's bucket."""
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
    op = op_of(request)
    creates = op is not None and op.owner is Owner.STREAM_WRITE and request.method == "PUT"
    if value is None or not creates:
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
