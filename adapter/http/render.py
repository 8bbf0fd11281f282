"""Errors into HTTP responses, in one middleware; and the JSON body every JSON answer uses.

Every failure a handler raises becomes `{"error": {"code", "message"}}` with its code's status
(`statuses.py`) here, and nowhere else builds an error body. Successful results are rendered by
their own handlers (`streams.py`, `buckets.py`, `live.py`, `health.py`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from http import HTTPStatus

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from adapter.http.malformed import refused
from adapter.http.statuses import status_of
from adapter.log.errors import LogUnavailable, OutcomeUnknown
from adapter.protocol.errors import ErrorCode, ProtocolError
from topology.errors import BrokerUnavailable

log = logging.getLogger(__name__)

RETRY_AFTER_S = "1"
# The status a request is logged with when its client hung up before it was answered
# (nginx's convention); it is never sent.
CLIENT_CLOSED = 499
ERROR_CODE = web.ResponseKey("error_code", str)
# The response a handler has begun to send (set as it is prepared): a failure after that point
# cannot be answered with another response, only by breaking the connection off.
STARTED = web.RequestKey("started_response", web.StreamResponse)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

INTERNAL = ProtocolError(ErrorCode.INTERNAL, "internal error")
_HTTP_CODES: dict[int, ErrorCode] = {
    400: ErrorCode.BAD_REQUEST,
    404: ErrorCode.NOT_FOUND,
    405: ErrorCode.METHOD_NOT_ALLOWED,
    413: ErrorCode.PAYLOAD_TOO_LARGE,
}


def json_response(
    body: object, status: int = 200, headers: Mapping[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=json.dumps(body, separators=(",", ":")).encode(),
        status=status,
        content_type="application/json",
        headers=headers,
    )


def error_response(
    error: ProtocolError, headers: Mapping[str, str] | None = None, **extra: object
) -> web.Response:
    """`{"error": {"code", "message"}}` (and `extra` fields beside it) with the code's status."""
    headers = dict(headers or {}) | error.headers
    if error.retriable:
        headers.setdefault("Retry-After", RETRY_AFTER_S)
    body = {"error": {"code": error.code.code, "message": error.message}} | extra
    response = json_response(body, status=status_of(error.code), headers=headers)
    response[ERROR_CODE] = error.code.code  # for the request log
    return response


def error_bytes(error: ProtocolError, headers: Mapping[str, str]) -> bytes:
    """`error_response` as the bytes of a whole HTTP/1.1 answer, ending the connection: for
    a connection refused before any request of it is read (it has no request to answer)."""
    body = json.dumps(
        {"error": {"code": error.code.code, "message": error.message}}, separators=(",", ":")
    ).encode()
    fields = {"Content-Type": "application/json", "Content-Length": str(len(body))}
    fields |= {"Connection": "close", **headers, **error.headers}
    if error.retriable:
        fields.setdefault("Retry-After", RETRY_AFTER_S)
    status = status_of(error.code)
    lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}"]
    lines += [f"{name}: {value}" for name, value in fields.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


@web.middleware
async def errors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Render every failure as `{"error": {"code", "message"}}` with its precise status."""
    try:
        return await handler(request)
    except Exception as error:  # noqa: BLE001 - every failure is answered or broken off below
        started = request.get(STARTED)
        try:
            if started is None:
                return _answer(request, error)
            return _break_off(request, started, error)
        finally:
            # `_answer` re-raises the failure, so its traceback holds `_answer`'s frame, which
            # holds the failure: a reference cycle, freed only by a full garbage collection,
            # that kept every frame of the failed request alive with its locals. A refused
            # gzip bomb's decoded body (8 MiB) stayed that way: twenty in a row held 160 MiB.
            error.__traceback__ = None
    finally:
        # A response begun here holds its request, which holds it under STARTED: a cycle that
        # aiohttp breaks only when the response ends normally. An SSE session or long-poll
        # whose client hung up never does, and every such session stayed in memory with its
        # request, response and connection (6 KiB) until a full collection, which the tuned
        # collector (`cli.tune_gc`) runs rarely. A response prepared later sets it again.
        request.pop(STARTED, None)


def _answer(request: web.Request, failure: Exception) -> web.StreamResponse:
    """The error response for a failure raised before any response began."""
    try:
        raise failure
    except ProtocolError as error:
        return error_response(error)
    except (LogUnavailable, BrokerUnavailable) as error:
        return error_response(ProtocolError(ErrorCode.UNAVAILABLE, str(error)))
    except OutcomeUnknown as error:
        return error_response(ProtocolError(ErrorCode.OUTCOME_UNKNOWN, str(error)))
    except web.HTTPException as error:
        if error.status < 400:
            raise
        code = _HTTP_CODES.get(error.status, ErrorCode.BAD_REQUEST)
        return error_response(ProtocolError(code, error.reason, headers=_allow(error)))
    except HttpProcessingError as error:  # a malformed body (bad chunk size, cut short)
        response = error_response(refused(error))
        response.force_close()
        return response
    except ConnectionError:
        if request.transport is None:  # the client hung up: nobody to answer
            log.debug("client hung up during %s %s", request.method, request.path)
            return web.Response(status=CLIENT_CLOSED)
        log.exception("unhandled error in %s %s", request.method, request.path)
        return error_response(INTERNAL)
    except Exception:
        # A bug, not a bad request: logged with its traceback, answered without internals.
        log.exception("unhandled error in %s %s", request.method, request.path)
        return error_response(INTERNAL)


def _break_off(
    request: web.Request, started: web.StreamResponse, error: Exception
) -> web.StreamResponse:
    """A failure after the response began (a streamed body, an SSE session): its status and
    part of its body are on the wire, so another response would only corrupt the framing. The
    connection is dropped instead, so the client sees a body cut short (never one that looks
    complete) and retries; aiohttp's own end of the response then finds it gone."""
    if isinstance(error, ConnectionError):  # the client hung up: nobody to tell
        log.debug("client hung up during %s %s", request.method, request.path)
    elif isinstance(error, ProtocolError | LogUnavailable | BrokerUnavailable | OutcomeUnknown):
        log.warning("%s %s broke off after it began: %s", request.method, request.path, error)
    else:
        log.exception("unhandled error in %s %s after it began", request.method, request.path)
    if request.transport is not None:
        request.transport.abort()
    return started


def _allow(error: web.HTTPException) -> dict[str, str]:
    allow = error.headers.get("Allow")
    return {"Allow": allow} if allow else {}
