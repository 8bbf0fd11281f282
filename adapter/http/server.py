"""The connection handler under the routes: what never reaches a route is answered as JSON.

aiohttp's parser refuses a malformed request before any middleware runs, and answers it with
a plain-text 400 that echoes the input, logged as an ERROR traceback; aiohttp has no hook for
it (aio-libs/aiohttp#3287). `ProtocolHandler` answers those as every other error is answered:
`{"error": {...}}` with the precise status (414, 431, 400), the CORS and `nosniff` headers, and
no traceback, since they are the client's mistake. `ProtocolRunner` serves an app with it.
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestHandler, _ErrInfo

from adapter.http.malformed import refused
from adapter.http.observe import (
    METRICS,
    REQUEST_ID,
    REQUEST_ID_HEADER,
    UNMATCHED,
    log_request,
    method_label,
    request_id,
)
from adapter.http.render import error_response
from adapter.http.security import CORS, SECURITY_HEADERS, CorsPolicy, decorate
from adapter.metrics import Metrics
from adapter.protocol.errors import ErrorCode, ProtocolError

log = logging.getLogger(__name__)


class ProtocolHandler(RequestHandler):
    """aiohttp's connection handler, with errors below the routes rendered as ours."""

    def __init__(
        self,
        manager: web.Server,
        *,
        metrics: Metrics | None,
        cors: CorsPolicy | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(manager, **kwargs)
        self.metrics = metrics
        self.cors = cors  # the app's CORS policy: a refused request has no app to ask

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._fail_body_being_read()

    def _fail_body_being_read(self) -> None:
        """A malformed body (a bad chunk size) arriving while its handler reads it: aiohttp
        queues the parse error as a next request and leaves the read waiting for ever. The
        error goes to the read instead, which the errors middleware answers 400."""
        request = self._current_request
        if request is None or not self._messages or request.content.is_eof():
            return
        message, _ = self._messages[-1]
        if isinstance(message, _ErrInfo) and isinstance(message.exc, HttpProcessingError):
            request.content.set_exception(message.exc)
            self._lingering_time = 0.0  # the rest of that body is not worth reading: close

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
        if self.cors is not None:
            decorate(response, request, self.cors)
        else:
            response.headers.update(SECURITY_HEADERS)
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
    """aiohttp's server, making a `ProtocolHandler` for each connection."""

    metrics: Metrics | None = None
    cors: CorsPolicy | None = None

    def __call__(self) -> RequestHandler:
        return ProtocolHandler(
            self, metrics=self.metrics, cors=self.cors, loop=self._loop, **self._kwargs
        )


class ProtocolRunner(web.AppRunner):
    """`web.AppRunner` whose connections are handled by `ProtocolHandler`."""

    async def _make_server(self) -> web.Server:
        made = await super()._make_server()
        server = ProtocolServer(
            made.request_handler,
            request_factory=made.request_factory,
            handler_cancellation=made.handler_cancellation,
            loop=made._loop,
            **made._kwargs,
        )
        server.metrics = self.app.get(METRICS)
        server.cors = self.app.get(CORS)
        return server
