"""What a route is, and how the app is built from a table of them (`adapter/http/routes.py`).

One `Route` per URL template, one `Op` per method on it, each saying everything the app needs
to know of it: its handler, what a caller needs to be let in (`route_needs`), whether and how
its stream's or bucket's write-slot owner is involved (`forward`), its kind of body (`bodies`)
and its description (`openapi`). `install` registers the table in aiohttp's router and keeps
the `Op` each router entry came from, so every middleware asks the matched route's `Op`
instead of recognising a route by its path or its URL variables.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from aiohttp import web

from adapter.auth.policy import Need
from adapter.http.bodies import ROUTE_BODIES, Body
from adapter.http.render import Handler
from adapter.http.request_checks import defer_continue

Json = dict[str, Any]
# What a request on a route needs to be let in; None on an `Op`: public (no token asked).
NeedOf = Callable[[web.Request], Need]
# A stream's route on each surface; the routes below a stream extend them.
FLAT_STREAM = "/v1/stream/{path:.+}"
BUCKETED_STREAM = "/{bucket}/{stream}"
_REGEX = re.compile(r"\{(\w+):[^{}]*\}")  # `{path:.+}`: a variable with its own pattern


class Owner(Enum):
    """What a request on the route asks of the write slot owning its stream or bucket."""

    NONE = "none"  # nothing: served by whichever instance it reaches
    STREAM_READ = "stream_read"  # a stream's read: a sibling worker owning it syncs it first
    STREAM_WRITE = "stream_write"  # create, append, delete: forwarded with a forward id
    SNAPSHOT = "snapshot"  # a snapshot publish: forwarded, untagged
    STREAM_STATE = "stream_state"  # fence, trim: forwarded; no record to learn the outcome by
    BUCKET = "bucket"  # a bucket's create, configuration or delete: forwarded

    @property
    def on_stream(self) -> bool:
        return self in _STREAM_WRITES or self is Owner.STREAM_READ

    @property
    def forwarded(self) -> bool:
        return self in _STREAM_WRITES or self is Owner.BUCKET


_STREAM_WRITES = frozenset({Owner.STREAM_WRITE, Owner.SNAPSHOT, Owner.STREAM_STATE})


@dataclass(frozen=True)
class Link:
    """An OpenAPI link from one operation's success to the next of a workflow."""

    status: int
    to: str  # the next operation's id
    parameters: Mapping[str, str]


@dataclass(frozen=True)
class Doc:
    """How `/openapi.json` describes one operation: its statuses (an error status names every
    error code it may carry), the query parameters and request headers it reads (described
    once in `api_schemas`), and its body (`body`: any bytes; `schema`: a JSON document)."""

    summary: str
    ok: Mapping[int, str]
    errors: tuple[int, ...] = ()
    query: tuple[str, ...] = ()
    headers: tuple[str, ...] = ()
    body: bool = False
    schema: Json | None = None
    schema_required: bool = False
    operation_id: str | None = None
    link: Link | None = None


@dataclass(frozen=True)
class Op:
    """One method on a route. `doc` None only on a catch-all (method `*`), which answers
    404 or 405 and is described by nothing."""

    method: str
    handler: Handler
    need: NeedOf | None
    owner: Owner
    body: Body
    doc: Doc | None
    head: bool = False  # HEAD answered too, as GET without a body (RFC 9110 §9.3.2)


@dataclass(frozen=True)
class Route:
    path: str  # aiohttp's template, a variable's own pattern included (`{path:.+}`)
    ops: tuple[Op, ...]
    # Below a stream (`snapshot/{offset}`): registered under both surfaces, and the flat
    # surface never creates a stream at such a URL.
    below_stream: str | None = field(default=None)

    @property
    def template(self) -> str:
        """The path without its variables' patterns, as aiohttp's `canonical` has it."""
        return _REGEX.sub(r"{\1}", self.path)


Table = tuple[Route, ...]
ROUTES = web.AppKey("routes", Table)
_OPS = web.AppKey("route_ops", dict[web.AbstractRoute, Op])


def below(stream: str, route: Route) -> Route:
    """A stream's sub-resource (`route.below_stream`) under one surface's stream route."""
    assert route.below_stream is not None
    return replace(route, path=f"{stream}/{route.below_stream}")


def unlinked(route: Route) -> Route:
    """`route` without operation ids and links (a second surface of linked operations: an
    operation id names one operation of the document)."""
    ops = tuple(
        replace(op, doc=replace(op.doc, operation_id=None, link=None)) if op.doc else op
        for op in route.ops
    )
    return replace(route, ops=ops)


def install(app: web.Application, table: Table) -> None:
    """Register `table` in the app's router, in its order (aiohttp tries routes in the order
    they were added), and keep each router entry's `Op` and kind of body."""
    ops: dict[web.AbstractRoute, Op] = {}
    app[ROUTES] = table
    app[_OPS] = ops
    for route in table:
        resource = app.router.add_resource(route.path)
        for op in route.ops:
            methods = ("HEAD", op.method) if op.head else (op.method,)
            for method in methods:
                added = resource.add_route(method, op.handler, expect_handler=defer_continue)
                ops[added] = op
                app[ROUTE_BODIES].declare(added, op.body)


def op_of(request: web.Request) -> Op | None:
    """The `Op` of the route the request matched (None: no route did, or not from a table)."""
    return request.app.get(_OPS, {}).get(request.match_info.route)


def sub_resources(table: Table) -> list[str]:
    """The URL templates served below a stream's path (`trim`, `snapshot/{offset}`, ...)."""
    below_streams = (route.below_stream for route in table if route.below_stream is not None)
    return list(dict.fromkeys(below_streams))  # once, though served under both surfaces


def public_paths(table: Table) -> frozenset[str]:
    """The fixed paths every method of which is public: a method they do not serve is
    answered 405 without asking for a token."""
    return frozenset(
        route.path
        for route in table
        if "{" not in route.path and all(op.need is None for op in route.ops)
    )
