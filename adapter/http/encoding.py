"""Coded request bodies: refused early unless gzip or zstd, then decoded within their limit.

A request's `Content-Encoding` is judged before anything else reads the body
(`content_encoding_middleware`: 415 for a coding we do not decode, `adapter/protocol/codings.py`).
A gzip or zstd body is decoded once the body limit, `Expect` and the in-flight budget have
passed (`decoding_middleware`), chunk by chunk, never producing more than its route's limit:
past it the answer is 413 and the rest is not decoded, so a small body that would inflate to
gigabytes costs at most the limit. A zstd frame that declares a larger size than the limit is
refused before any of it is decoded, and one that needs a window over 8 MiB (RFC 9659's
ceiling for the zstd coding) is malformed: zstd's own default of 128 MiB let one small body
make the decoder allocate that much. Everything after (handlers, forwarding, the append-bytes
rate limit) sees the decoded bytes from `request.read()`. A streamed body (a snapshot
publish) is passed on as it arrives and is refused coded, with 415. An uncoded control body
(`adapter/http/bodies.py`) is read here too, bounded the same way: sent in chunks, it declares
no length that the early 413 could refuse.
"""

from __future__ import annotations

import asyncio
import io
import zlib
from collections.abc import Awaitable, Iterator
from typing import Protocol

from aiohttp import hdrs, web
from aiohttp.typedefs import Middleware
from backports import zstd

from adapter.http.aiohttp_internals import set_read_body
from adapter.http.bodies import RouteBodies
from adapter.http.render import Handler
from adapter.protocol.codings import GZIP, request_coding
from adapter.protocol.errors import ErrorCode, ProtocolError

# aiohttp decodes gzip, deflate, br and zstd bodies unless told not to; we decode them
# ourselves, within each route's limit, so the app's server is built with this.
RAW_BODIES = {"auto_decompress": False}
# The coding of the request's body (set only when it has one), for the middlewares after.
BODY_CODING = web.RequestKey("body_coding", str)
READ_SIZE = 64 * 1024
PIECE = 64 * 1024  # the most one decoding step yields: memory stays near what is kept
# The largest zstd window decoded: 8 MiB, what RFC 9659 has every encoder of the HTTP coding
# keep to. The decoder allocates the window a frame asks for (up to its content size).
ZSTD_WINDOW_LOG_MAX = 23
_GZIP_WBITS = 16 + zlib.MAX_WBITS


class Decoder(Protocol):
    def feed(self, data: bytes) -> Iterator[bytes]: ...

    def finished(self) -> bool: ...


class GzipDecoder:
    """gzip, member after member (RFC 1952 allows several), in pieces of at most PIECE."""

    def __init__(self) -> None:
        self._member = zlib.decompressobj(_GZIP_WBITS)

    def feed(self, data: bytes) -> Iterator[bytes]:
        while True:
            if self._member.eof and data:  # another member follows
                self._member = zlib.decompressobj(_GZIP_WBITS)
            piece = self._member.decompress(data, PIECE)
            yield piece
            data = self._member.unused_data if self._member.eof else self._member.unconsumed_tail
            if not data and len(piece) < PIECE:
                return

    def finished(self) -> bool:
        return self._member.eof


class ZstdDecoder:
    """zstd, frame after frame, in pieces of at most PIECE; a frame declaring more than
    `most` bytes (0: no bound) is refused before it is decoded."""

    def __init__(self, most: int = 0) -> None:
        self.most = most
        self._frame = _zstd_frame()
        self._fresh = True  # nothing of the current frame fed yet

    def feed(self, data: bytes) -> Iterator[bytes]:
        while True:
            if self._frame.eof and data:  # another frame follows
                self._frame, self._fresh = _zstd_frame(), True
            if self._fresh and data:
                self._fresh = False
                _check_declared(data, self.most)
            yield self._frame.decompress(data, PIECE)
            data = self._frame.unused_data if self._frame.eof else b""
            if not data and (self._frame.eof or self._frame.needs_input):
                return

    def finished(self) -> bool:
        return self._frame.eof


def _zstd_frame() -> zstd.ZstdDecompressor:
    return zstd.ZstdDecompressor(
        options={zstd.DecompressionParameter.window_log_max: ZSTD_WINDOW_LOG_MAX}
    )


def _check_declared(frame: bytes, most: int) -> None:
    """413 for a frame whose header declares more than `most` bytes: a bomb that says so is
    refused before its first piece. A header cut short by the chunking is not checked: the
    pieces are bounded as they are decoded anyway."""
    try:
        declared = zstd.get_frame_info(frame).decompressed_size
    except zstd.ZstdError:
        return
    if most and declared is not None:
        _within(declared, most)


def decoder(coding: str, most: int = 0) -> Decoder:
    """The decoder of `coding`; one that can tell before decoding that a body decodes to more
    than `most` bytes (0: no bound) refuses it then."""
    return GzipDecoder() if coding == GZIP else ZstdDecoder(most)


@web.middleware
def content_encoding_middleware(
    request: web.Request, handler: Handler
) -> Awaitable[web.StreamResponse]:
    """415 for a Content-Encoding we do not decode, before the body is read or `100 Continue`
    sent, whatever the method. Not a coroutine: no frame of it stays beside a long-lived
    request (a parked SSE session or long-poll)."""
    coding = request_coding(request.headers.getall(hdrs.CONTENT_ENCODING, ()))
    if coding is not None and request.body_exists:
        request[BODY_CODING] = coding
    return handler(request)


def decoding_middleware(bodies: RouteBodies) -> Middleware:
    # Not a coroutine: a request with no body to read first gets the handler's awaitable
    # back, so no frame of it stays suspended beside a long-lived request (a parked SSE
    # session or long-poll).
    @web.middleware
    def decoding(request: web.Request, handler: Handler) -> Awaitable[web.StreamResponse]:
        coding = request.get(BODY_CODING)
        if coding is None:
            if bodies.control(request) and request.body_exists:
                return _bounded_first(bodies, request, handler)
            return handler(request)
        if bodies.streamed(request):
            raise ProtocolError(ErrorCode.UNSUPPORTED_MEDIA_TYPE, "a snapshot is published uncoded")
        return _decoded_first(bodies, coding, request, handler)

    return decoding


async def _bounded_first(
    bodies: RouteBodies, request: web.Request, handler: Handler
) -> web.StreamResponse:
    # Bounded as it arrives: a chunked body declares no length to refuse early.
    set_read_body(request, await bounded_body(request, bodies.limit(request)))
    return await handler(request)


async def _decoded_first(
    bodies: RouteBodies, coding: str, request: web.Request, handler: Handler
) -> web.StreamResponse:
    limit = bodies.limit(request)
    decoded = await decoded_body(request, decoder(coding, limit), limit)
    # What `request.read()` answers from now on: the body as it is stored.
    set_read_body(request, decoded)
    return await handler(request)


async def decoded_body(request: web.Request, coded: Decoder, limit: int) -> bytes:
    """The body decoded; 413 once it (or its coded form) passes `limit`, 400 if malformed."""
    # A `BytesIO`, not a `bytearray`: its `getvalue()` hands over the bytes it grew instead of
    # copying them, so a body of 8 MiB is never held twice (16 MiB at once, for 8 KiB of gzip).
    body = io.BytesIO()
    received = 0
    async for chunk in request.content.iter_chunked(READ_SIZE):
        received += len(chunk)
        _within(received, limit)
        for piece in _pieces(coded, chunk):
            body.write(piece)
            _within(body.tell(), limit)
            # A body already received is read without a pause, and a few KiB may decode to
            # megabytes: the rest of the loop runs between two pieces (one is PIECE at most).
            await asyncio.sleep(0)
    if not coded.finished():
        raise ProtocolError(ErrorCode.BAD_REQUEST, "the coded body ends before its end")
    return body.getvalue()


async def bounded_body(request: web.Request, limit: int) -> bytes:
    """The uncoded body; 413 once it passes `limit`, before more of it is read."""
    body = io.BytesIO()  # handed over, not copied (see `decoded_body`)
    async for chunk in request.content.iter_chunked(READ_SIZE):
        body.write(chunk)
        _within(body.tell(), limit, "")
    return body.getvalue()


def _pieces(coded: Decoder, chunk: bytes) -> Iterator[bytes]:
    try:
        yield from coded.feed(chunk)
    except (zlib.error, zstd.ZstdError) as error:
        raise ProtocolError(
            ErrorCode.BAD_REQUEST, f"the coded body is malformed: {error}"
        ) from None


def _within(size: int, limit: int, how: str = ", decoded") -> None:
    if size > limit:
        raise ProtocolError(
            ErrorCode.PAYLOAD_TOO_LARGE, f"a request body is at most {limit} bytes{how}"
        )
