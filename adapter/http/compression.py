"""Answers coded for the wire: a read's body sent gzip or zstd when the client accepts it.

What is coded: the body of a `GET` answered 200 with its whole body at once (catch-up and
long-poll reads, and the JSON documents such as `/openapi.json`), at least `MIN_BYTES` long,
in the coding `Accept-Encoding` weighs highest (`adapter/protocol/codings.py`). Such an
answer says `Vary: Accept-Encoding` whether it was coded or not, so a cache keeps one copy
per coding. A coded answer's ETag is made weak (`W/"..."`): the bytes differ from the uncoded
answer's, the data does not, and `If-None-Match` compares weakly, so revalidation still
answers 304.

`/bootstrap`, streamed but one-shot, is coded gzip as it is written when the client takes
gzip (`code_stream`), with the same `Vary`.

What is not: anything else streamed (SSE, snapshot downloads), written as it goes (an SSE event
must reach the reader when it happens, not when a compressor's block fills; and every browser's
`EventSource` sends `Accept-Encoding` whatever the page wants, so the header cannot be a reader
asking for it), an answer already coded (one from a slot's owner), and errors.
"""

from __future__ import annotations

import asyncio
import gzip

from aiohttp import hdrs, web
from backports import zstd

from adapter.http.render import Handler
from adapter.protocol.caching import vary_with
from adapter.protocol.codings import GZIP, accepts, response_coding

MIN_BYTES = 256  # below this a coded body saves little or grows
THREAD_BYTES = 256 * 1024  # coded off the event loop from this size up
GZIP_LEVEL = 6
ZSTD_LEVEL = 3


@web.middleware
async def compression_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    response = await handler(request)
    if not isinstance(response, web.Response) or not _codable(request, response):
        return response
    response.headers[hdrs.VARY] = vary_with(response.headers.get(hdrs.VARY), "Accept-Encoding")
    coding = response_coding(request.headers.get(hdrs.ACCEPT_ENCODING))
    if coding is None:
        return response
    assert isinstance(response.body, bytes)  # _codable checked it
    response.body = await _coded(coding, response.body)
    response.headers[hdrs.CONTENT_ENCODING] = coding
    if (etag := response.headers.get(hdrs.ETAG)) and not etag.startswith("W/"):
        response.headers[hdrs.ETAG] = f"W/{etag}"
    return response


def code_stream(request: web.Request, response: web.StreamResponse) -> None:
    """Before `prepare`: a streamed one-shot answer (`/bootstrap`) coded gzip, chunk by chunk
    as it is written, when the client takes gzip (aiohttp codes no stream in zstd)."""
    response.headers[hdrs.VARY] = vary_with(response.headers.get(hdrs.VARY), "Accept-Encoding")
    if accepts(request.headers.get(hdrs.ACCEPT_ENCODING), GZIP):
        response.enable_compression(web.ContentCoding.gzip)


def _codable(request: web.Request, response: web.Response) -> bool:
    return (
        request.method == "GET"
        and response.status == 200
        and isinstance(response.body, bytes)
        and len(response.body) >= MIN_BYTES
        and hdrs.CONTENT_ENCODING not in response.headers
        and not response.prepared
    )


async def _coded(coding: str, body: bytes) -> bytes:
    if len(body) < THREAD_BYTES:
        return encode(coding, body)
    return await asyncio.to_thread(encode, coding, body)


def encode(coding: str, body: bytes) -> bytes:
    if coding == GZIP:
        return gzip.compress(body, GZIP_LEVEL, mtime=0)
    return zstd.compress(body, ZSTD_LEVEL)
