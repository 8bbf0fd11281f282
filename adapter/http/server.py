"""The connection handler under the routes: what never reaches a route is answered as JSON,
and no connection holds the process for longer, or in greater numbers, than its limits allow.

aiohttp's parser refuses a malformed request before any middleware runs, and answers it with
a plain-text 400 that echoes the input, logged as an ERROR traceback; aiohttp has no hook for
it (aio-libs/aiohttp#3287). `ProtocolHandler` answers those as every other error is answered:
`{"error": {...}}` with the precise status (414, 431, 400), the CORS and `nosniff` headers, and
no traceback, since they are the client's mistake. It also enforces `ConnectionLimits`
(`adapter/http/connections.py`): a head or body later than its timeout is answered 408 and the
connection closed; a connection over a limit is answered 503 as soon as it is made, before
any request, and closed at once, so that it never holds a descriptor. At shutdown a
connection lingering over the unread rest of a body it has answered (aiohttp reads on it for up
to 10 s, so that the client sees the answer) stops lingering: it has no request in flight for
the drain to wait for. `ProtocolRunner` serves an app with it.

The handler's private state this needs (its queued requests, its idle waiter, its current
request, its lingering) is reached only through `adapter/http/aiohttp_internals.py`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, cast

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.streams import StreamReader
from aiohttp.web_protocol import RequestHandler

from adapter.http.aiohttp_internals import (
    WrappingRunner,
    current_request,
    end_linger,
    handler_settings,
    has_queued,
    queued_parse_error,
    refuse_head,
    stop_lingering,
    waiting_for_head,
)
from adapter.http.connections import (
    CONNECTION_LIMITS,
    ConnectionCounts,
    ConnectionLimits,
    ResidentMemory,
)
from adapter.http.malformed import Overloaded, RequestTimedOut, TooManyConnections, refused
from adapter.http.observe import (
    METRICS,
    REQUEST_ID,
    REQUEST_ID_HEADER,
    UNMATCHED,
    log_request,
    method_label,
    request_id,
    route_of,
)
from adapter.http.peer_headers import carries_key
from adapter.http.render import Handler, error_bytes, error_response
from adapter.http.security import CORS, SECURITY_HEADERS, CorsPolicy
from adapter.metrics import Metrics
from adapter.protocol.errors import ErrorCode, ProtocolError

log = logging.getLogger(__name__)

# Rules for the whole server: no app has them, so the runner finds them in the app it serves.
DEFAULT_CORS = CorsPolicy(frozenset())
# Served past the memory cap: an orchestrator must still see the process alive and why.
ALWAYS_SERVED = frozenset({"/healthz", "/readyz"})
# A connection longer than this to close at shutdown is logged with what it was doing then.
SLOW_CLOSE_S = 1.0
DEFAULT_LIMITS = ConnectionLimits(
    header_timeout_s=10,
    body_timeout_s=60,
    keepalive_timeout_s=75,
    max_connections=0,
    max_per_address=0,
)


class ProtocolHandler(RequestHandler):
    """aiohttp's connection handler, with errors below the routes rendered as ours."""

    def __init__(
        self,
        manager: ProtocolServer,
        *,
        metrics: Metrics | None,
        cors: CorsPolicy,
        counts: ConnectionCounts,
        memory: ResidentMemory,
        loop: asyncio.AbstractEventLoop,
        **kwargs: Any,
    ) -> None:
        limits = counts.limits
        kwargs["keepalive_timeout"] = limits.keepalive_timeout_s  # idle, and to a first request
        super().__init__(manager, loop=loop, **kwargs)
        self.loop = loop
        self.metrics = metrics
        self.cors = cors  # the app's CORS policy: a refused request has no app to ask
        self.counts = counts
        self.memory = memory
        self.address: str | None = None  # the client's, once admitted
        self.peer = False  # another instance's (or maybe, while `refusal`), counted in all only
        self.refusal: str | None = None  # over its address's limit, unless a peer's
        self._head_deadline: asyncio.TimerHandle | None = None
        # The last request's body, which a linger reads on. Kept no longer than aiohttp keeps
        # it: its request loop holds the same body until the next request comes.
        self.body: StreamReader | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        address = _client_address(self.peername)
        refusal = self.counts.refusal(address, _descriptor(transport))
        if refusal is not None:
            self._refuse(transport, refusal)
            return
        over = self.counts.over_address(address)
        if over is None:
            self.counts.admit(address)
            self.address = address
        elif self.counts.limits.peer_key:
            # Another instance forwards from a few addresses: its first request, carrying the
            # deployment's key, may let it in (counted in all meanwhile); else it is refused.
            self.counts.admit_unaddressed()
            self.peer, self.refusal = True, over
            self._start_head_deadline()
        else:
            self._refuse(transport, over)

    def _refuse(self, transport: asyncio.BaseTransport, refusal: str) -> None:
        """Answer 503 at once and close: a refused connection held until its head's timeout
        kept its descriptor, and enough silent ones used every descriptor the process had
        (the Kafka clients and the object store then failed with EMFILE)."""
        error = ProtocolError(ErrorCode.TOO_MANY_CONNECTIONS, refusal)
        writable = cast(asyncio.Transport, transport)  # uvloop's are not asyncio's classes
        writable.write(error_bytes(error, SECURITY_HEADERS))
        writable.close()  # once the answer is handed to the kernel
        log.debug("refused a connection from %s: %s", self.peername, refusal)
        if self.metrics is not None:
            self.metrics.rejections.labels(error.code.code).inc()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._stop_head_deadline()
        if self.peer:
            self.counts.release_peer()
            self.peer = False
        elif self.address is not None:
            self.counts.release(self.address)
            self.address = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if data and waiting_for_head(self):
            self._start_head_deadline()
        super().data_received(data)
        if has_queued(self):
            self._stop_head_deadline()
        self._fail_body_being_read()

    def _start_head_deadline(self) -> None:
        if self._head_deadline is None:
            self._head_deadline = self.loop.call_later(
                self.counts.limits.header_timeout_s, self._head_late
            )

    def _stop_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_late(self) -> None:
        """A head begun but unfinished at its deadline: answered 408 as if the parser had
        refused it, then closed."""
        self._head_deadline = None
        if not waiting_for_head(self):
            return
        seconds = self.counts.limits.header_timeout_s
        refuse_head(self, RequestTimedOut(message=f"the request's head took over {seconds:g} s"))

    async def within_limits(self, request: web.BaseRequest, handler: Handler) -> web.StreamResponse:
        """Run `handler` unless the connection is over a limit; fail its body's read once the
        body is later than `body_timeout` (answered 408 by the errors middleware)."""
        body = self.body = request.content
        if self.refusal is not None or self.address is not None:
            self._admit_peer(request)
        if self.refusal is not None:
            raise TooManyConnections(message=self.refusal)
        if request.path not in ALWAYS_SERVED and self.memory.over():
            raise Overloaded(message="this instance is past max_memory_bytes; retry")
        if body.is_eof():
            return await handler(request)  # type: ignore[arg-type]
        deadline = self.loop.call_later(self.counts.limits.body_timeout_s, self._body_late, request)
        try:
            return await handler(request)  # type: ignore[arg-type]
        finally:
            deadline.cancel()

    async def shutdown(self, timeout: float | None = 15.0) -> None:  # noqa: ASYNC109 - aiohttp's
        """Close the connection once its request in flight, if any, is answered (within
        `timeout`). A linger over the rest of an answered body ends now: aiohttp awaits one
        already begun as if it were a request, and a client that never sent that rest held a
        stopping instance for the whole `lingering_time` (10 s) with nothing in flight."""
        began, doing = self.loop.time(), self._doing()
        if self.body is not None and current_request(self) is None and end_linger(self.body):
            log.info("stopping: ended a connection's linger over the unread rest of a body")
        await super().shutdown(timeout)
        took = self.loop.time() - began
        if took >= SLOW_CLOSE_S:
            log.info("stopping: a connection %s closed in %.1f s", doing, took)

    def _doing(self) -> str:
        """What the connection does, for the log of a close that held the stop (a linger is
        ended at once: a slow close with no request handled was writing an answer)."""
        request = current_request(self)
        if request is not None:
            return f"handling {request.method} {route_of(request)}"
        return "with no request being handled"

    def _from_a_peer(self, request: web.BaseRequest) -> bool:
        return carries_key(request, self.counts.limits.peer_key)

    def _admit_peer(self, request: web.BaseRequest) -> None:
        """Another instance's connection (its request carries the deployment's key): off its
        address's count, and admitted if only that count refused it."""
        if not self._from_a_peer(request):
            return
        if self.address is not None:
            self.counts.peer(self.address)
        self.peer, self.refusal, self.address = True, None, None

    def _body_late(self, request: web.BaseRequest) -> None:
        if request.content.is_eof():
            return
        seconds = self.counts.limits.body_timeout_s
        request.content.set_exception(
            RequestTimedOut(message=f"the request's body took over {seconds:g} s")
        )
        stop_lingering(self)  # the rest of that body is not worth waiting for

    def _fail_body_being_read(self) -> None:
        """A malformed body (a bad chunk size) arriving while its handler reads it: aiohttp
        queues the parse error as a next request and leaves the read waiting for ever. The
        error goes to the read instead, which the errors middleware answers 400."""
        request = current_request(self)
        if request is None or request.content.is_eof():
            return
        error = queued_parse_error(self)
        if error is not None:
            request.content.set_exception(error)
            stop_lingering(self)  # the rest of that body is not worth reading: close

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if request.writer.output_size > 0:  # a response has begun: the connection is broken
            raise ConnectionError("the response was already started")
        if isinstance(exc, HttpProcessingError):
            error = refused(exc)
            log.debug("refused a malformed request from %s: %s", request.remote, exc)
        else:
            # The errors middleware answers every handler failure; reaching here is a bug.
            log.error("unhandled error (status %d)", status, exc_info=exc)
            error = ProtocolError(ErrorCode.INTERNAL, "internal error")
        response = error_response(error)
        response.force_close()  # the parser's state after a malformed request is unknown
        self.cors.decorate(response, request)
        self._observe(request, response, error)
        return response

    def _observe(
        self, request: web.BaseRequest, response: web.Response, error: ProtocolError
    ) -> None:
        """The request id, log line and metrics the observe middleware gives routed requests."""
        request[REQUEST_ID] = response.headers[REQUEST_ID_HEADER] = request_id(None)
        size = len(response.body) if isinstance(response.body, bytes) else 0
        log_request(request, response.status, 0.0, size, error.code.code, UNMATCHED)
        if self.metrics is not None:
            status = str(response.status)
            method = method_label(request.method)
            self.metrics.requests.labels(method, UNMATCHED, status).inc()
            self.metrics.rejections.labels(error.code.code).inc()


class ProtocolServer(web.Server):
    """aiohttp's server, making a `ProtocolHandler` for each connection; the app's handler
    runs within the connection's limits."""

    def __init__(
        self,
        handler: Handler,
        *,
        metrics: Metrics | None,
        cors: CorsPolicy,
        limits: ConnectionLimits,
        loop: asyncio.AbstractEventLoop,
        handler_kwargs: dict[str, Any],
        **kwargs: Any,
    ) -> None:
        super().__init__(self._within_limits, loop=loop, **kwargs, **handler_kwargs)
        self.loop = loop
        self.handler_kwargs = handler_kwargs  # what each connection's handler is made with
        self.app_handler = handler
        self.metrics = metrics
        self.cors = cors
        self.counts = ConnectionCounts(limits)
        self.memory = ResidentMemory(limits.max_memory_bytes)

    async def _within_limits(self, request: web.BaseRequest) -> web.StreamResponse:
        protocol = request.protocol
        assert isinstance(protocol, ProtocolHandler)
        return await protocol.within_limits(request, self.app_handler)

    def __call__(self) -> RequestHandler:
        return ProtocolHandler(
            self,
            metrics=self.metrics,
            cors=self.cors,
            counts=self.counts,
            memory=self.memory,
            loop=self.loop,
            **self.handler_kwargs,
        )


class ProtocolRunner(WrappingRunner):
    """`web.AppRunner` whose connections are handled by `ProtocolHandler`."""

    def wrap(self, made: web.Server) -> web.Server:
        return ProtocolServer(
            made.request_handler,
            metrics=self.app.get(METRICS),
            cors=self.app.get(CORS, DEFAULT_CORS),
            limits=self.app.get(CONNECTION_LIMITS, DEFAULT_LIMITS),
            request_factory=made.request_factory,
            handler_cancellation=made.handler_cancellation,
            loop=asyncio.get_running_loop(),  # the one the app's server was made on
            handler_kwargs=handler_settings(made),
        )


def _descriptor(transport: asyncio.BaseTransport) -> int:
    """The connection's descriptor number (-1 when it has none)."""
    sock = transport.get_extra_info("socket")
    return int(sock.fileno()) if sock is not None else -1


def _client_address(peername: object) -> str:
    """The client's host (a Unix socket's peers all count as one)."""
    if isinstance(peername, tuple) and peername:
        return str(peername[0])
    return str(peername)
