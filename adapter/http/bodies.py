"""What each route accepts as a request body, declared with the route itself.

Most routes hold their body whole (an append is read, then written in one transaction): the
default, `Body.HELD`, at most `max_body_bytes`. A route whose handler streams its body
declares `Body.STREAMED` when it is added (a snapshot publish: up to `max_snapshot_bytes`,
passed to the object store chunk by chunk, never held whole). The early 413
(`request_checks`), the in-flight budget (`body_budget`), forwarding and the handler all ask
`RouteBodies` about the request's matched route, so nothing recognises a route by its path.
"""

from __future__ import annotations

from enum import Enum

from aiohttp import web


class Body(Enum):
    HELD = "held"  # read whole before it is used
    STREAMED = "streamed"  # read chunk by chunk as it is passed on


class RouteBodies:
    """Each route's kind of body (undeclared: held), and the size each kind may reach."""

    def __init__(self, held_bytes: int, streamed_bytes: int) -> None:
        self._limits = {Body.HELD: held_bytes, Body.STREAMED: streamed_bytes}
        self._declared: dict[web.AbstractRoute, Body] = {}

    def declare(self, route: web.AbstractRoute, body: Body) -> None:
        self._declared[route] = body

    def body(self, request: web.Request) -> Body:
        return self._declared.get(request.match_info.route, Body.HELD)

    def limit(self, request: web.Request) -> int:
        """The largest body the request's route accepts (a longer one is 413)."""
        return self._limits[self.body(request)]

    def streamed(self, request: web.Request) -> bool:
        return self.body(request) is Body.STREAMED


ROUTE_BODIES = web.AppKey("route_bodies", RouteBodies)
