"""Every use of aiohttp's private internals, in one place, each with why no public hook serves.

Checked against aiohttp 3.14.5 (the version pinned in uv.lock);
`tests/unit/test_aiohttp_internals.py` checks that each internal below still exists with the
shape relied on, so that an upgrade that changes one fails there rather than in production.

The connection handler (`web_protocol.RequestHandler`), for `adapter/http/server.py`:

- `_messages` (a deque of `(message, payload)`) and `_waiter` (the future its request loop
  awaits while idle): whether the connection is idle between requests, so that a head begun
  but unfinished can be timed; and to queue a 408 for it as the parser queues its own
  refusals. aiohttp times no head (only idle keep-alive), and has no hook to answer a
  request of its own making (aio-libs/aiohttp#3287 asks for one for parser errors).
- `_ErrInfo` (`status`, `exc`, `message`): the queued refusal's type; the request loop answers
  it through `handle_error`, which is public and overridden.
- `_current_request`: the request whose handler runs, whose body a parse error queued as a
  next request must fail instead (else the body's read waits for ever). No public accessor.
- `_lingering_time`: set to 0 for one connection whose body is not worth reading on (late, or
  malformed), so the connection closes after its answer. Only the constructor takes it;
  `force_close()` would close before the answer is sent.
- The linger itself (in `start()`, a local loop reading on the answered request's body): ended
  at shutdown by failing that body's read with `CancelledError`, as `shutdown()` fails a
  running request's body; the loop takes that as the end of the body, not as an error, when
  its task is not being cancelled. `shutdown()` sets `_force_close`, which keeps a linger from
  beginning, but awaits one already begun (up to `lingering_time`, 10 s, within its timeout):
  no hook ends it, and cancelling the connection's task would need `_task_handler`.

The runner and the site, for `server.py` and `adapter/http/accepting.py`:

- `AppRunner._make_server`: where the app's `web.Server` is made; overridden to wrap it in
  ours. The public `ServerRunner` takes a server but then does not start or clean up the app.
- `web.Server._kwargs`: the connection handler's settings (the app's `handler_args` and the
  runner's access log) that the app merged into the server it made; not exposed otherwise.
- `BaseSite._server`: what a site's `stop()` closes, set by every site's `start()`; a site
  serving from its own listener must set it, as aiohttp's sites do.

The request (`web_request.BaseRequest`), for `adapter/http/encoding.py`:

- `_read_bytes`: what `request.read()` answers once read, set to the decoded (or bounded)
  body so that every handler reading the body sees it as stored. aiohttp can replace a
  request's method, URL or headers (`clone()`) but not its body; handlers asking a helper
  instead would silently read an empty body the day one called `request.read()`.
"""

from __future__ import annotations

import asyncio
import socket
from abc import abstractmethod
from typing import Any, Protocol

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.streams import EMPTY_PAYLOAD, StreamReader
from aiohttp.web_protocol import RequestHandler, _ErrInfo


def has_queued(handler: RequestHandler) -> bool:
    """Whether a parsed request (or a refusal) waits for the connection's request loop."""
    return bool(handler._messages)


def waiting_for_head(handler: RequestHandler) -> bool:
    """Idle between requests (not lingering over an unread body, not pipelining)."""
    waiter = handler._waiter
    return waiter is not None and not waiter.done() and not handler._messages


def refuse_head(handler: RequestHandler, error: HttpProcessingError) -> None:
    """Answer `error` as if the parser had refused the head now arriving: the request loop
    wakes and hands it to `handle_error`. Only while `waiting_for_head`."""
    waiter = handler._waiter
    if waiter is None or waiter.done():
        return
    status = error.code
    handler._messages.append((_ErrInfo(status, error, error.message), EMPTY_PAYLOAD))
    waiter.set_result(None)


def queued_parse_error(handler: RequestHandler) -> HttpProcessingError | None:
    """The parser's refusal last queued, if the last thing queued is one."""
    if not handler._messages:
        return None
    message, _ = handler._messages[-1]
    if isinstance(message, _ErrInfo) and isinstance(message.exc, HttpProcessingError):
        return message.exc
    return None


def current_request(handler: RequestHandler) -> web.BaseRequest | None:
    """The request whose handler runs on this connection, if one does."""
    return handler._current_request


def stop_lingering(handler: RequestHandler) -> None:
    """Close the connection after its answer rather than read on the rest of a body."""
    handler._lingering_time = 0.0


def end_linger(body: StreamReader) -> bool:
    """End now a linger over the unread rest of `body`, whose request has been answered: its
    read fails as aiohttp's shutdown fails a running request's body, which the linger takes
    as the body's end. A body read to its end, or already failed, is left as it is (False)."""
    if body.is_eof() or body.exception() is not None:
        return False
    body.set_exception(asyncio.CancelledError())
    return True


def handler_settings(server: web.Server) -> dict[str, Any]:
    """The settings `server` makes each connection handler with (beyond its loop)."""
    return dict(server._kwargs)


class Listener(Protocol):
    """What a site's `stop()` and its runner's `addresses` use of `asyncio.Server`."""

    @property
    def sockets(self) -> tuple[socket.socket, ...]: ...

    def close(self) -> None: ...


def set_site_server(site: web.BaseSite, server: Listener) -> None:
    """What the site's `stop()` closes and its runner's `addresses` lists."""
    site._server = server  # type: ignore[assignment]  # aiohttp types it `asyncio.Server`


def set_read_body(request: web.BaseRequest, body: bytes) -> None:
    """What `request.read()` (and `text()`, `json()`) answer from now on."""
    request._read_bytes = body


class WrappingRunner(web.AppRunner):
    """`web.AppRunner` serving its app through the server `wrap` makes of the app's own."""

    async def _make_server(self) -> web.Server:
        return self.wrap(await super()._make_server())

    @abstractmethod
    def wrap(self, made: web.Server) -> web.Server:
        """The server to serve, given the one the app made."""
