"""CORS (preflight on every route, the protocol's headers exposed) and browser security headers."""

from __future__ import annotations

from aiohttp import web

from adapter.http.render import Handler

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
    ]
)
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Cross-Origin-Resource-Policy": "cross-origin",
}


@web.middleware
async def cors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Answer preflights for any path; add CORS and security headers to every response."""
    if request.method == "OPTIONS":
        response: web.StreamResponse = web.Response(status=204, headers=_preflight(request))
    else:
        response = await handler(request)
    if not response.prepared:
        decorate(response, request)
    return response


def decorate(response: web.StreamResponse, request: web.Request) -> None:
    """Add the headers every response carries (called before a streaming response starts)."""
    response.headers.update(SECURITY_HEADERS)
    response.headers["Access-Control-Allow-Origin"] = request.headers.get("Origin", "*")
    response.headers["Access-Control-Expose-Headers"] = EXPOSED_HEADERS
    if "Origin" in request.headers:
        response.headers["Vary"] = "Origin"


def _preflight(request: web.Request) -> dict[str, str]:
    requested = request.headers.get("Access-Control-Request-Headers")
    return {
        "Access-Control-Allow-Methods": ALLOWED_METHODS,
        "Access-Control-Allow-Headers": requested or ALLOWED_HEADERS,
        "Access-Control-Max-Age": "86400",
    }
