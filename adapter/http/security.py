"""CORS with an allow-list of origins, and the browser security headers every response carries.

`cors_origins` empty (the default) means same-origin only: a cross-origin request, preflight
or not, is refused 403 `origin_not_allowed` before it does anything (a "simple" POST would
otherwise append before the browser hides the answer). Listed origins get their own origin
back in `Access-Control-Allow-Origin`; `*` (opt-in) lets any origin in and answers `*`.
Credentials are never allowed (tokens travel in `Authorization`, which needs none). A
preflight is answered before routing, so it is the same for resources that exist and not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

from aiohttp import web
from aiohttp.typedefs import Middleware

from adapter.http.render import Handler, error_response
from adapter.protocol.caching import vary_with
from adapter.protocol.errors import ErrorCode, ProtocolError

ALLOWED_METHODS = "GET, HEAD, POST, PUT, DELETE, OPTIONS"
ALLOWED_HEADERS = ", ".join(
    [
        "Content-Type",
        "Authorization",
        "If-Match",
        "If-None-Match",
        "Stream-TTL",
        "Stream-Expires-At",
        "Stream-Closed",
        "Stream-Seq",
        "Stream-Forked-From",
        "Stream-Fork-Offset",
        "Stream-Fencing-Token",
        "Producer-Id",
        "Producer-Epoch",
        "Producer-Seq",
    ]
)
EXPOSED_HEADERS = ", ".join(
    [
        "ETag",
        "Location",
        "Content-Type",
        "Stream-Next-Offset",
        "Stream-Cursor",
        "Stream-Up-To-Date",
        "Stream-Closed",
        "Stream-TTL",
        "Stream-Expires-At",
        "Stream-Snapshot-Offset",
        "Stream-Earliest-Offset",
        "Stream-SSE-Data-Encoding",
        "Producer-Epoch",
        "Producer-Seq",
        "Producer-Expected-Seq",
        "Producer-Received-Seq",
        "Retry-After",
        "WWW-Authenticate",
    ]
)
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Cross-Origin-Resource-Policy": "cross-origin",
}


@dataclass(frozen=True)
class CorsPolicy:
    origins: frozenset[str]  # exact origins (scheme://host[:port]); "*" lets any in
    # Decided once, not per response: whether any origin is let in.
    any_origin: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "any_origin", "*" in self.origins)

    def allows(self, origin: str, request: web.BaseRequest) -> bool:
        return self.any_origin or origin in self.origins or _same_origin(origin, request)

    def decorate(self, response: web.StreamResponse, request: web.BaseRequest) -> None:
        """Add the headers every response carries (the routes' and the parser's refusals)."""
        self.decorate_for(response, request.headers.get("Origin"), request)

    def decorate_for(
        self, response: web.StreamResponse, origin: str | None, request: web.BaseRequest
    ) -> None:
        """`decorate`, the request's Origin header already read."""
        response.headers.update(SECURITY_HEADERS)
        if not self.any_origin:
            # The answer depends on Origin: `Vary` says so to every cache, beside what the
            # route's answer varies with already (Authorization, on a read with auth on).
            response.headers["Vary"] = vary_with(response.headers.get("Vary"), "Origin")
        if origin is None or not self.allows(origin, request):
            return
        response.headers["Access-Control-Allow-Origin"] = "*" if self.any_origin else origin
        response.headers["Access-Control-Expose-Headers"] = EXPOSED_HEADERS


CORS = web.AppKey("cors", CorsPolicy)


def _same_origin(origin: str, request: web.BaseRequest) -> bool:
    try:
        return urlsplit(origin).netloc.lower() == request.host.lower()
    except ValueError:
        return False


def cors_middleware(policy: CorsPolicy) -> Middleware:
    @web.middleware
    async def cors(request: web.Request, handler: Handler) -> web.StreamResponse:
        """Refuse other origins; answer preflights for any path; decorate every response."""
        origin = request.headers.get("Origin")
        if origin is not None and not policy.allows(origin, request):
            response: web.StreamResponse = error_response(
                ProtocolError(
                    ErrorCode.ORIGIN_NOT_ALLOWED, "this origin is not allowed (cors_origins)"
                )
            )
        elif request.method == "OPTIONS":
            response = web.Response(status=204, headers=_preflight(request))
        else:
            response = await handler(request)
        if not response.prepared:
            policy.decorate_for(response, origin, request)
        return response

    return cors


def decorate(response: web.StreamResponse, request: web.Request) -> None:
    """Add the headers every response carries, before a handler's streaming response starts."""
    request.app[CORS].decorate(response, request)


def _preflight(request: web.Request) -> dict[str, str]:
    requested = request.headers.get("Access-Control-Request-Headers")
    return {
        "Access-Control-Allow-Methods": ALLOWED_METHODS,
        "Access-Control-Allow-Headers": requested or ALLOWED_HEADERS,
        "Access-Control-Max-Age": "86400",
    }
