"""Checks made on every request before its route reads a body or names a resource.

- A path whose percent-decoding is not UTF-8 (`%ff%fe`, the surrogate `%ed%a0%80`) is
  refused: yarl would keep such escapes as literal text, so `/b/%ff` and `/b/%25ff` would name
  one stream by two URLs.
- A body declared larger than its route accepts (`adapter/http/bodies.py`) is 413 at once,
  unread.
- `Expect: 100-continue` is answered only once those checks (and the middlewares before this
  one) have passed: routes use `defer_continue`, so aiohttp does not send `100 Continue`
  before any middleware has run, and a client told 413 never sends its body.
"""

from __future__ import annotations

from collections.abc import Awaitable
from urllib.parse import unquote_to_bytes

from aiohttp import hdrs, web
from aiohttp.typedefs import Middleware

from adapter.http.bodies import RouteBodies
from adapter.http.render import Handler, error_response
from adapter.protocol.errors import ErrorCode, ProtocolError

CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


# Set on a request whose route left its Expect header to `request_checks`.
EXPECT_DEFERRED = web.RequestKey("expect_deferred", bool)


async def defer_continue(request: web.Request) -> None:
    """The routes' Expect handler: nothing yet; `request_checks` answers it."""
    request[EXPECT_DEFERRED] = True


def require_utf8_path(raw_path: str) -> None:
    """400 unless the path (without its query) percent-decodes to valid UTF-8."""
    if not _decodes(raw_path.partition("?")[0]):
        raise ProtocolError(ErrorCode.BAD_REQUEST, "the path is not UTF-8 once percent-decoded")


def require_utf8_query(raw_query: str) -> None:
    """400 `invalid_query` unless the query percent-decodes to valid UTF-8 (yarl would read
    `%ff` as U+FFFD: a listing's prefix would name other streams than the client's)."""
    if not _decodes(raw_query):
        raise ProtocolError(ErrorCode.INVALID_QUERY, "the query is not UTF-8 once percent-decoded")


def _decodes(raw: str) -> bool:
    """Whether `raw` percent-decodes to valid UTF-8 (ASCII with no escape is, at once)."""
    if raw.isascii() and "%" not in raw:
        return True
    try:
        unquote_to_bytes(raw).decode("utf-8")
    except UnicodeError:
        return False
    return True


def request_checks_middleware(bodies: RouteBodies) -> Middleware:
    """Each route's own body limit applies (a streamed snapshot's is `max_snapshot_bytes`)."""

    # Not a coroutine: it hands back the handler's awaitable (or its refusal), so no frame of
    # it stays suspended beside a long-lived request (a parked SSE session or long-poll).
    @web.middleware
    def request_checks(request: web.Request, handler: Handler) -> Awaitable[web.StreamResponse]:
        require_utf8_path(request.raw_path)
        length = request.content_length
        largest = bodies.limit(request)
        if length is not None and length > largest:
            response = error_response(
                ProtocolError(
                    ErrorCode.PAYLOAD_TOO_LARGE, f"a request body is at most {largest} bytes"
                )
            )
            response.force_close()  # its body, if sent anyway, is not read
            return _answered(response)
        if hdrs.EXPECT in request.headers:
            return _expecting(request, handler)
        return handler(request)

    return request_checks


async def _answered(response: web.StreamResponse) -> web.StreamResponse:
    return response


async def _expecting(request: web.Request, handler: Handler) -> web.StreamResponse:
    await _answer_expect(request)
    return await handler(request)


async def _answer_expect(request: web.Request) -> None:
    if not request.get(EXPECT_DEFERRED):
        return  # aiohttp's default handler has answered it already
    expect = request.headers[hdrs.EXPECT]
    if expect.lower() != "100-continue":
        raise ProtocolError(ErrorCode.EXPECTATION_FAILED, f"unknown Expect {expect!r}")
    if request.version >= (1, 1):
        await request.writer.write(CONTINUE)
        request.writer.output_size = 0  # the response proper has not started
