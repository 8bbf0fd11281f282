"""Which operation class each route is, and on which bucket: what a request needs to be let in.

One rule covers every route: GET and HEAD read, POST appends, PUT and DELETE administer
(bucket and stream create/delete, fork, snapshot publish/delete). `tests/unit/test_operations`
checks it against a table of every route the app serves, so a new route is a decision.
"""

from __future__ import annotations

from aiohttp import web

from adapter.auth.policy import Need
from adapter.auth.scopes import Operation
from adapter.protocol.identifiers import split_compat_path, validate_bucket_id

PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/openapi.json"})
CONSOLE = "/ui"
CONSOLE_API = "/ui/api/"
_BY_METHOD = {
    "GET": Operation.READ,
    "HEAD": Operation.READ,
    "POST": Operation.APPEND,
    "PUT": Operation.ADMIN,
    "DELETE": Operation.ADMIN,
}


def is_public(request: web.Request) -> bool:
    """Health checks, and the web console's own files and mode: none of them holds data (the
    console then calls the API and `/ui/api/` with the caller's token like any client)."""
    path = request.path
    if path in PUBLIC_PATHS or path == CONSOLE_API + "config":
        return True
    return (path == CONSOLE or path.startswith(CONSOLE + "/")) and not path.startswith(CONSOLE_API)


def need_of(request: web.Request) -> Need:
    """What the request does; a path no route serves needs only a valid token (then 404)."""
    info = request.match_info
    if info.http_exception is not None:
        return Need(None)
    if request.path.startswith(CONSOLE_API):  # the console's read-only API
        if "b" in info:
            return Need(Operation.READ, validate_bucket_id(info["b"]))
        if request.path == CONSOLE_API + "buckets":
            return Need(Operation.READ, "")  # every bucket's id: a read:* scope
        return Need(None)
    operation = _BY_METHOD.get(request.method, Operation.ADMIN)  # an unknown method: fail closed
    if "path" in info:
        return Need(operation, split_compat_path(info["path"])[0])
    return Need(operation, validate_bucket_id(info["bucket"]))
