"""`GET /{bucket}/{stream}/bootstrap`: the snapshot and every retained message after it, as
one RFC 2046 `multipart/mixed` body streamed part by part.

The framing is written here rather than with aiohttp's `MultipartWriter`, which wants every
part before it writes: a bootstrap's parts come from Kafka read by read, and memory must stay
bounded whatever the stream's size. Each part is `--boundary CRLF Content-Type CRLF CRLF body`
and the CRLF before the next delimiter belongs to the delimiter (RFC 2046 §5.1.1), so a part's
body is exactly the message's bytes.
"""

from __future__ import annotations

import secrets

from aiohttp import web

from adapter.http.compression import code_stream
from adapter.http.keys import SNAPSHOTS
from adapter.http.security import decorate
from adapter.http.streams import stream_ref
from adapter.protocol.caching import NO_STORE
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.offsets import encode
from adapter.service.snapshots import Bootstrap

EMPTY_SNAPSHOT_TYPE = "application/octet-stream"
NO_SNAPSHOT = "-1"


def new_boundary() -> str:
    return f"dk-bootstrap-{secrets.token_hex(16)}"


def part_head(boundary: str, content_type: str, first: bool = False) -> bytes:
    """What goes before a part's body (the delimiter, and its CRLF unless it opens the body)."""
    lead = "" if first else "\r\n"
    return f"{lead}--{boundary}\r\nContent-Type: {content_type}\r\n\r\n".encode()


def closing(boundary: str) -> bytes:
    return f"\r\n--{boundary}--\r\n".encode()


def bootstrap_headers(boot: Bootstrap, boundary: str) -> dict[str, str]:
    meta = boot.meta
    snapshot = NO_SNAPSHOT if boot.snapshot is None else encode(boot.snapshot.offset)
    headers = {
        "Content-Type": f"multipart/mixed; boundary={boundary}",
        "Stream-Snapshot-Offset": snapshot,
        "Stream-Next-Offset": encode(meta.next_offset),
        "Stream-Up-To-Date": "true",
        "Cache-Control": NO_STORE,
    }
    if meta.closed:
        headers["Stream-Closed"] = "true"
    return headers


async def bootstrap(request: web.Request) -> web.StreamResponse:
    if "live" in request.query:
        raise ProtocolError(
            ErrorCode.INVALID_QUERY, "/bootstrap is one-shot: tail from Stream-Next-Offset"
        )
    boot = await request.app[SNAPSHOTS].bootstrap(stream_ref(request))
    boundary = new_boundary()
    response = web.StreamResponse(status=200, headers=bootstrap_headers(boot, boundary))
    decorate(response, request)
    code_stream(request, response)
    await response.prepare(request)
    try:
        await _write_parts(request, response, boot, boundary)
    except ConnectionResetError:
        return response  # the client went away: stop reading for it
    await response.write_eof()
    return response


async def _write_parts(
    request: web.Request, response: web.StreamResponse, boot: Bootstrap, boundary: str
) -> None:
    """The snapshot part, then one part per message; each write waits for the client."""
    service = request.app[SNAPSHOTS]
    snapshot_type = EMPTY_SNAPSHOT_TYPE if boot.snapshot is None else boot.snapshot.content_type
    await response.write(part_head(boundary, snapshot_type, first=True) + boot.first_range)
    async for piece in service.rest_of(boot.snapshot):
        await response.write(piece)
    head = part_head(boundary, boot.meta.content_type)
    async for messages in service.updates(boot):  # one bounded read: one write
        if messages:
            await response.write(b"".join(head + message for message in messages))
    await response.write(closing(boundary))
