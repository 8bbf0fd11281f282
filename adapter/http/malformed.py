"""What aiohttp's HTTP parser refuses, said in our error vocabulary.

The parser raises before any route runs (a NUL or bare CR, an over-long line, too many
headers) or while a handler reads the body (a bad chunk size, a body shorter than its
`Content-Length`). Each is the client's mistake: a 4xx, never a traceback. The request line
and header fields get different limits so that an over-long line says which it was.
"""

from __future__ import annotations

from aiohttp.http_exceptions import HttpProcessingError, LineTooLong

from adapter.protocol.errors import ErrorCode, ProtocolError

# A request line (method, target, version) longer than this is 414; nginx's default is 8 KiB.
MAX_REQUEST_LINE = 8192
# One header field (name and value) longer than this is 431; aiohttp's own default.
MAX_HEADER_FIELD = 8190
MAX_HEADERS = 128
# Server arguments that set the limits above (aiohttp's `handler_args`).
PARSER_LIMITS = {
    "max_line_size": MAX_REQUEST_LINE,
    "max_field_size": MAX_HEADER_FIELD,
    "max_headers": MAX_HEADERS,
}


class RequestTimedOut(HttpProcessingError):
    """A request's head or body came later than its timeout (`adapter/http/connections.py`)."""

    code = 408


class TooManyConnections(HttpProcessingError):
    """A connection over its address's limit whose request is not another instance's: its
    request is answered 503, then it is closed."""

    code = 503


class Overloaded(HttpProcessingError):
    """The process is past its memory cap: a request is answered 503 until it is back under."""

    code = 503


def refused(error: HttpProcessingError) -> ProtocolError:
    """The 4xx for a request the parser could not take; its message never echoes the input."""
    if isinstance(error, RequestTimedOut):
        return ProtocolError(ErrorCode.REQUEST_TIMEOUT, error.message)
    if isinstance(error, Overloaded):
        return ProtocolError(ErrorCode.UNAVAILABLE, error.message)
    if isinstance(error, TooManyConnections):
        return ProtocolError(ErrorCode.TOO_MANY_CONNECTIONS, error.message)
    if isinstance(error, LineTooLong):
        if error.args[1] == MAX_REQUEST_LINE:
            return ProtocolError(
                ErrorCode.URI_TOO_LONG, f"the request line is over {MAX_REQUEST_LINE} bytes"
            )
        return ProtocolError(
            ErrorCode.HEADERS_TOO_LARGE, f"a header field is over {MAX_HEADER_FIELD} bytes"
        )
    if "Too many headers" in error.message:
        return ProtocolError(ErrorCode.HEADERS_TOO_LARGE, f"over {MAX_HEADERS} header fields")
    return ProtocolError(ErrorCode.BAD_REQUEST, f"malformed HTTP request: {_summary(error)}")


def _summary(error: HttpProcessingError) -> str:
    """The parser's reason without the bytes it quotes (they may be large or binary)."""
    first = error.message.strip().splitlines()[0] if error.message.strip() else ""
    return first.rstrip(":") or type(error).__name__
