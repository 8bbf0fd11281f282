"""A process-wide budget of request body bytes in flight: past it, 503 before a body is read.

A request's body stays in memory from when it is read until the request is answered (an
append's until its transaction commits), so the bodies of the requests in flight are what the
process holds for them. A request with a body reserves its `Content-Length` (a chunked or coded
body, of unknown decoded size, the largest its route accepts: `adapter/http/bodies.py`), never
more than the largest body a handler holds at once, until it is answered; one that does not fit
is answered 503 `unavailable` with `Retry-After` at once, its body unread.
"""

from __future__ import annotations

from collections.abc import Awaitable

from aiohttp import web
from aiohttp.typedefs import Middleware

from adapter.http.bodies import RouteBodies
from adapter.http.encoding import BODY_CODING
from adapter.http.render import Handler
from adapter.protocol.errors import ErrorCode, ProtocolError

OVER_BUDGET_MESSAGE = "too many request bytes in flight in this instance; retry"


class BodyBudget:
    """Bytes reserved by the bodies of requests in flight, up to `limit`."""

    def __init__(self, limit: int, largest_body: int) -> None:
        self.limit = limit
        self.largest_body = largest_body
        self.in_flight = 0

    def cost(self, content_length: int | None, route_limit: int | None = None) -> int:
        """What a body reserves: its length, or the largest its route accepts when it is not
        known yet; at most the largest body held at once (a streamed one holds less)."""
        if content_length is None:
            content_length = self.largest_body if route_limit is None else route_limit
        return min(content_length, self.largest_body)

    def reserve(self, cost: int) -> bool:
        if self.in_flight + cost > self.limit:
            return False
        self.in_flight += cost
        return True

    def release(self, cost: int) -> None:
        self.in_flight -= cost


BODY_BUDGET = web.AppKey("body_budget", BodyBudget)


def body_budget_middleware(budget: BodyBudget, bodies: RouteBodies) -> Middleware:
    # Not a coroutine: a request without a body gets the handler's awaitable back, so no
    # frame of it stays suspended beside a long-lived request (a parked SSE session or
    # long-poll).
    @web.middleware
    def body_budget(request: web.Request, handler: Handler) -> Awaitable[web.StreamResponse]:
        if not request.body_exists:
            return handler(request)
        # A coded body may decode to anything up to its route's limit: that is its cost.
        length = None if BODY_CODING in request else request.content_length
        cost = budget.cost(length, bodies.limit(request))
        if not budget.reserve(cost):
            raise ProtocolError(ErrorCode.UNAVAILABLE, OVER_BUDGET_MESSAGE)
        return _reserved(budget, cost, request, handler)

    return body_budget


async def _reserved(
    budget: BodyBudget, cost: int, request: web.Request, handler: Handler
) -> web.StreamResponse:
    """The request served with `cost` reserved, released however it ends."""
    try:
        return await handler(request)
    finally:
        budget.release(cost)
