"""The request span middleware, installed only when tracing is on (adapter/tracing/)."""

from __future__ import annotations

from aiohttp import web
from aiohttp.typedefs import Middleware

from adapter.http.observe import method_label, route_of
from adapter.http.render import CLIENT_CLOSED, Handler
from adapter.tracing import TRACEPARENT
from adapter.tracing.otel import Tracing


def tracing_middleware(tracing: Tracing) -> Middleware:
    """A span per request, named by method and route template, the current span while the
    handler runs (the append's transaction span is its child). Outside the errors middleware,
    so it sees every error as the answer it became."""

    @web.middleware
    async def trace(request: web.Request, handler: Handler) -> web.StreamResponse:
        method, route = method_label(request.method), route_of(request)
        with tracing.request(method, route, request.headers.get(TRACEPARENT)) as span:
            status = CLIENT_CLOSED  # unless an answer is made
            try:
                response = await handler(request)
                status = response.status
                return response
            except web.HTTPException as answer:  # a redirect the errors middleware passed on
                status = answer.status
                raise
            finally:
                tracing.answered(span, status)

    return trace
