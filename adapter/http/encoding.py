"""Request bodies are taken as sent: a request declaring a content coding is refused first."""

from __future__ import annotations

from aiohttp import hdrs, web

from adapter.http.render import Handler
from adapter.protocol.headers import require_identity_encoding

# aiohttp decodes gzip, deflate, br and zstd bodies unless told not to; we never want it to
# (see `content_encoding_middleware`), so the app's server is built with this.
RAW_BODIES = {"auto_decompress": False}


@web.middleware
async def content_encoding_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """415 for any request whose Content-Encoding is not `identity`, before its body is read.

    Whatever the method: every route that reads a body (stream PUT and POST, and the
    forwarding of writes to their slot's owner) is behind this check.
    """
    require_identity_encoding(request.headers.getall(hdrs.CONTENT_ENCODING, ()))
    return await handler(request)
