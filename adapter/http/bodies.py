"""What each route accepts as a request body, declared with the route itself.

Every route takes a control body by default, `Body.CONTROL`: a small document read whole (a
bucket's configuration or mount, a trim), at most `CONTROL_BODY_BYTES` however it is sent,
since nothing a control route reads comes near it and 8 MiB of JSON parsed at once, many
times over, would stall every request. A stream's create and append hold their data whole
(read, then written in one transaction): they declare `Body.HELD`, at most `max_body_bytes`.
A route whose handler streams its body declares `Body.STREAMED` (a snapshot publish: up to
`max_snapshot_bytes`, passed to the object store chunk by chunk, never held whole). The early
413 (`request_checks`), the bounded read of a control body (`encoding.decoding_middleware`),
the in-flight budget (`body_budget`), forwarding and the handler all ask `RouteBodies` about
the request's matched route, so nothing recognises a route by its path.
"""

from __future__ import annotations

from enum import Enum
from typing import Final

from aiohttp import web

# The largest control body: a bucket configuration or mount is a few hundred bytes.
CONTROL_BODY_BYTES: Final = 64 * 1024


class Body(Enum):
    CONTROL = "control"  # a small document, read whole (bounded) before the handler runs
    HELD = "held"  # a stream's data, read whole before it is written
    STREAMED = "streamed"  # read chunk by chunk as it is passed on


class RouteBodies:
    """Each route's kind of body (undeclared: held), and the size each kind may reach."""

    def __init__(
        self, held_bytes: int, streamed_bytes: int, control_bytes: int = CONTROL_BODY_BYTES
    ) -> None:
        self._limits = {
            Body.CONTROL: min(control_bytes, held_bytes),
            Body.HELD: held_bytes,
            Body.STREAMED: streamed_bytes,
        }
        self._declared: dict[web.AbstractRoute, Body] = {}

    def declare(self, route: web.AbstractRoute, body: Body) -> None:
        self._declared[route] = body

    def body(self, request: web.Request) -> Body:
        return self._declared.get(request.match_info.route, Body.CONTROL)

    def limit(self, request: web.Request) -> int:
        """The largest body the request's route accepts (a longer one is 413)."""
        return self._limits[self.body(request)]

    def streamed(self, request: web.Request) -> bool:
        return self.body(request) is Body.STREAMED

    def control(self, request: web.Request) -> bool:
        return self.body(request) is Body.CONTROL


ROUTE_BODIES = web.AppKey("route_bodies", RouteBodies)
