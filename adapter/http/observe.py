"""Per request: its id, its metrics and its one JSON log line (`durable_kafka.requests`).

The request id is the client's `X-Request-Id` when it is a sane token, else a new one; it is
echoed in `X-Request-Id` on every response (set as the response is prepared, so streamed
answers carry it too) and forwarded with writes to their owner, as `traceparent` is. The log
line names the route template, never the query string (which may carry `access_token`), and
no request header but `traceparent`: credentials are never logged.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import time
import uuid

from aiohttp import web
from aiohttp.typedefs import Middleware

from adapter import request_lines
from adapter.heap_trim import HeapTrim, malloc_trim
from adapter.http.encoding import BODY_CODING
from adapter.http.render import CLIENT_CLOSED, ERROR_CODE, STARTED, Handler
from adapter.metrics import Metrics

REQUEST_ID_HEADER = "X-Request-Id"
REQUEST_ID = web.RequestKey("request_id", str)
METRICS = web.AppKey("metrics", Metrics)
_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/+=-]{0,127}")
# W3C trace context: version-traceid-parentid-flags.
# W3C trace context: version ff is invalid, and so are an all-zero trace id or parent id.
_TRACEPARENT = re.compile(
    r"(?!ff)[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}"
)
UNMATCHED = "unmatched"
# Methods are labels too: any other token a client sends is counted as "other".
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS"})
# Which read a 2xx GET on each stream route template was.
_READ_ROUTES = {
    "/{bucket}/{stream}": "catch-up",
    "/v1/stream/{path}": "catch-up",
    "/{bucket}/{stream}/snapshot/{offset}": "snapshot",
    "/{bucket}/{stream}/bootstrap": "bootstrap",
}

# Fields a handler or middleware adds to its request's log line (`add_log_fields`).
LOG_FIELDS = web.RequestKey("log_fields", dict[str, object])

requests_log = logging.getLogger("durable_kafka.requests")


def add_log_fields(request: web.Request, **fields: object) -> None:
    """Put `fields` in the request's log line: the server's own values, never a credential."""
    if not requests_log.isEnabledFor(logging.INFO):
        return  # no line is logged (`log_request`)
    request.setdefault(LOG_FIELDS, {}).update(fields)


def request_id(given: str | None) -> str:
    """The client's id when it is a token of at most 128 safe characters, else a new one:
    32 hex digits, a random one per process then a count (a fresh uuid4 read the kernel's
    random source for every request)."""
    if given is not None and _REQUEST_ID.fullmatch(given):
        return given
    return f"{_ids.prefix}{next(_ids.count):016x}"


class _Ids:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.prefix = uuid.uuid4().hex[:16]
        self.count = itertools.count()


_ids = _Ids()
os.register_at_fork(after_in_child=_ids.reset)  # a forked worker never repeats its parent's


def method_label(method: str) -> str:
    return method if method in _METHODS else "other"


def route_of(request: web.BaseRequest) -> str:
    """The route template a request matched (`/{bucket}/{stream}`), never its path."""
    match_info = getattr(request, "match_info", None)
    resource = match_info.route.resource if match_info is not None else None
    return resource.canonical if resource is not None else UNMATCHED


def observe_middleware(metrics: Metrics, heap: HeapTrim | None = None) -> Middleware:
    heap = heap or HeapTrim(malloc_trim())

    @web.middleware
    async def observe(request: web.Request, handler: Handler) -> web.StreamResponse:
        started = time.monotonic()
        request[REQUEST_ID] = request_id(request.headers.get(REQUEST_ID_HEADER))
        sse = request.method == "GET" and request.query.get("live") == "sse"
        if sse:
            metrics.sse_connections.inc()
        response: web.StreamResponse | None = None
        try:
            response = await handler(request)
            return response
        except web.HTTPException as redirect:  # the errors middleware passes only < 400 on
            response = redirect
            raise
        finally:
            if sse:
                metrics.sse_connections.dec()
            _record(metrics, request, response, time.monotonic() - started)
            if request.body_exists:  # a large body's memory given back (adapter/heap_trim.py)
                heap.after(request.content_length, BODY_CODING in request)

    return observe


async def echo_request_id(request: web.Request, response: web.StreamResponse) -> None:
    """`on_response_prepare`: every response carries the request's id; the one that begins is
    remembered, so a failure after this point breaks it off (`render._break_off`)."""
    response.headers[REQUEST_ID_HEADER] = request.get(REQUEST_ID) or request_id(None)
    request[STARTED] = response


def _record(
    metrics: Metrics, request: web.Request, response: web.StreamResponse | None, seconds: float
) -> None:
    status = response.status if response is not None else CLIENT_CLOSED
    route, sent = route_of(request), _bytes_sent(response)
    method = method_label(request.method)
    metrics.answered(method, route, status, seconds)
    # Only an error response carries a code (all >= 400): a lookup that misses raises a
    # KeyError inside `Mapping.get`, a cost paid by every success if asked unconditionally.
    code = response.get(ERROR_CODE) if response is not None and status >= 400 else None
    if code is not None:
        metrics.rejections.labels(code).inc()
    mode = _read_mode(request, route)
    if mode is not None and 200 <= status < 300:
        metrics.read_bytes.labels(mode).inc(sent)
    log_request(request, status, seconds, sent, code, route)


def log_request(
    request: web.BaseRequest,
    status: int,
    seconds: float,
    sent: int,
    code: str | None,
    route: str,
) -> None:
    """The request's one log line; every field is the server's own or a validated token."""
    if not requests_log.isEnabledFor(logging.INFO):
        return  # not built at all: the line's fields cost more than the rest of observing
    fields: dict[str, object] = {
        "request_id": request.get(REQUEST_ID),
        "method": method_label(request.method),
        "route": route,
        "status": status,
        "duration_ms": round(seconds * 1000, 3),
        "bytes_in": request.content_length or 0,
        "bytes_out": sent,
        "remote": request.remote,
    }
    if code is not None:
        fields["error_code"] = code
    fields |= request.get(LOG_FIELDS, {})
    traceparent = request.headers.get("traceparent")
    if traceparent is not None and _TRACEPARENT.fullmatch(traceparent):
        fields["traceparent"] = traceparent
    lines = request_lines.installed.lines
    if lines is not None:  # a serving process: formatted and written off the event loop
        lines.put(fields, error=status >= 400)
    else:
        requests_log.info("%s %s %d", fields["method"], route, status, extra=fields)


def _read_mode(request: web.Request, route: str) -> str | None:
    if request.method != "GET":
        return None
    mode = _READ_ROUTES.get(route)
    if mode == "catch-up":
        return request.query.get("live", mode)
    return mode


def _bytes_sent(response: web.StreamResponse | None) -> int:
    """Body bytes of the answer: as written when it was streamed, else as it will be."""
    if response is None:
        return 0
    if response.prepared:
        return response.body_length
    body = response.body if isinstance(response, web.Response) else None
    return len(body) if isinstance(body, bytes | bytearray) else 0
