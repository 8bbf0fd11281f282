"""Per (principal, bucket) limits at the edge: requests and appended bytes per second, and
live readers in flight per bucket. Past any of them: 429 with `Retry-After`, nothing done.

Runs after authentication (it needs the principal; with auth off every caller is one) and
before a body is read. Limits are per instance. A forwarded write counts on the instance it
entered and again on the owner.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web
from aiohttp.typedefs import Middleware

from adapter.auth.token_buckets import RateLimiter, ReaderCap
from adapter.config import Settings
from adapter.http.auth import principal_of
from adapter.http.encoding import BODY_CODING
from adapter.http.render import Handler
from adapter.http.route_needs import is_public, need_of
from adapter.protocol.errors import ErrorCode, ProtocolError

LIVE_MODES = ("long-poll", "sse")


@dataclass
class RateLimits:
    """This instance's limits at the edge, from the settings (None: that limit is off)."""

    requests: RateLimiter | None
    append_bytes: RateLimiter | None
    readers: ReaderCap | None
    clock: Callable[[], float] = field(default=time.monotonic)

    @classmethod
    def of(cls, settings: Settings) -> RateLimits:
        rate, burst = settings.rate_limit_requests, settings.rate_limit_burst
        byte_rate = settings.rate_limit_append_bytes
        cap = settings.max_live_readers_per_bucket
        return cls(
            RateLimiter(rate, burst or rate) if rate else None,
            RateLimiter(byte_rate, byte_rate) if byte_rate else None,
            ReaderCap(cap) if cap else None,
        )

    @property
    def any(self) -> bool:
        return bool(self.requests or self.append_bytes or self.readers)


def rate_limit_middleware(limits: RateLimits) -> Middleware:
    # Not a coroutine: it hands back the handler's awaitable when nothing is left to do once
    # the handler answers, so no frame of it stays suspended beside a long-lived request (a
    # parked SSE session or long-poll) that no live readers' cap counts.
    @web.middleware
    def rate_limit(request: web.Request, handler: Handler) -> Awaitable[web.StreamResponse]:
        if not limits.any or is_public(request):
            return handler(request)
        bucket_id = need_of(request).bucket_id
        if bucket_id is None:
            return handler(request)
        principal = principal_of(request)
        key = (principal.name if principal else "", bucket_id)
        _take(limits.requests, key, 1, limits.clock(), "requests")
        appending = request.method == "POST" and limits.append_bytes is not None
        # A coded body is charged what it decodes to, once it is read: that is what is stored.
        length = None if BODY_CODING in request else request.content_length
        if appending and length is not None:
            _take(limits.append_bytes, key, length, limits.clock(), "bytes")
        reading = limits.readers is not None and request.query.get("live") in LIVE_MODES
        if not reading and not (appending and length is None):
            return handler(request)
        return _around(limits, key, request, handler)

    return rate_limit


async def _around(
    limits: RateLimits, key: tuple[str, str], request: web.Request, handler: Handler
) -> web.StreamResponse:
    """A live read counted among its bucket's readers while it lasts, or an append of no
    declared length charged what its body was once it is read."""
    if limits.readers is None or request.query.get("live") not in LIVE_MODES:
        response = await handler(request)
    else:
        response = await _as_reader(limits.readers, key[1], request, handler)
    charged = BODY_CODING in request or request.content_length is None
    if request.method == "POST" and limits.append_bytes is not None and charged:
        limits.append_bytes.charge(key, len(await request.read()), limits.clock())
    return response


def _take(limiter: RateLimiter | None, key: object, cost: int, now: float, what: str) -> None:
    if limiter is None:
        return
    wait_s = limiter.take(key, cost, now)
    if wait_s:
        raise ProtocolError(
            ErrorCode.RATE_LIMITED,
            f"over the {what} rate for this bucket; retry in {wait_s}s",
            headers={"Retry-After": str(wait_s)},
        )


async def _as_reader(
    cap: ReaderCap, bucket_id: str, request: web.Request, handler: Handler
) -> web.StreamResponse:
    if not cap.enter(bucket_id):
        raise ProtocolError(
            ErrorCode.TOO_MANY_READERS,
            f"bucket {bucket_id} has {cap.limit} live readers on this instance; retry",
            headers={"Retry-After": "1"},
        )
    try:
        return await handler(request)
    finally:
        cap.leave(bucket_id)
