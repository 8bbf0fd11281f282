"""The `Host` allow-list: a page that rebinds its own DNS name to this server is refused.

A browser sends the page's host name in `Host`, so a DNS-rebinding page (evil.example
resolving to 127.0.0.1) is told apart from a client that means this server. Allowed by
default: the listen address, the advertised URL's host (other instances forward there),
`localhost` and the loopback addresses; `allowed_hosts` adds names, `*` turns the check off.
Ports are not compared: the name is what a rebinding page cannot forge.
"""

from __future__ import annotations

import socket
from collections.abc import Awaitable
from urllib.parse import urlsplit

from aiohttp import web
from aiohttp.typedefs import Middleware

from adapter.config import Settings, comma_list
from adapter.http.render import Handler
from adapter.protocol.errors import ErrorCode, ProtocolError

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARDS = frozenset({"", "0.0.0.0", "::"})
# `Host` values whose verdict is kept: a client names this server in a few spellings; past
# this many, the rest are judged each time (a client spraying names grows nothing).
REMEMBERED_HOSTS = 64


def allowed_hosts(settings: Settings) -> frozenset[str] | None:
    """The host names requests may carry; None when any is allowed."""
    configured = {host_name(item) for item in comma_list(settings.allowed_hosts)}
    if "*" in configured:
        return None
    listen = settings.host.lower()
    own = {socket.gethostname().lower()} if listen in WILDCARDS else {listen}
    advertised = (urlsplit(settings.advertised_url).hostname or "").lower()
    return frozenset(LOOPBACK_NAMES | own | {advertised} | configured) - {""}


def host_name(host: str) -> str:
    """`Host` without its port, lower case, without a trailing dot; IPv6 without brackets."""
    host = host.strip().lower()
    if host.startswith("["):
        host = host[1:].partition("]")[0]
    elif host.count(":") == 1:
        host = host.partition(":")[0]
    return host.rstrip(".")


def host_middleware(allowed: frozenset[str] | None) -> Middleware:
    verdicts: dict[str, bool] = {}  # Host header -> allowed: parsed once, not per request

    def allows(host: str) -> bool:
        verdict = verdicts.get(host)
        if verdict is None:
            verdict = allowed is None or host_name(host) in allowed
            if len(verdicts) < REMEMBERED_HOSTS:
                verdicts[host] = verdict
        return verdict

    # Not a coroutine: it checks, then hands back the handler's awaitable, so no frame of it
    # stays suspended beside a long-lived request (a parked SSE session or long-poll).
    @web.middleware
    def check_host(request: web.Request, handler: Handler) -> Awaitable[web.StreamResponse]:
        host = request.headers.get("Host")
        if allowed is not None and host is not None and not allows(host):
            raise ProtocolError(
                ErrorCode.HOST_NOT_ALLOWED,
                "this server does not answer for that Host (see allowed_hosts)",
            )
        return handler(request)

    return check_host
