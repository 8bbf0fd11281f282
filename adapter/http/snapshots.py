"""Snapshot routes: `PUT|GET|DELETE /{bucket}/{stream}/snapshot/{offset}` and
`GET /{bucket}/{stream}/snapshot` (a redirect to the latest)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web

from adapter.http.bodies import ROUTE_BODIES
from adapter.http.keys import SNAPSHOTS
from adapter.http.security import decorate
from adapter.http.streams import DEFAULT_CONTENT_TYPE, stream_ref
from adapter.protocol.caching import NO_STORE
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.headers import normalize_content_type
from adapter.protocol.model import SnapshotPointer, StreamMeta
from adapter.protocol.offsets import encode, parse_offset

READ_SIZE = 256 * 1024


def path_offset(request: web.Request) -> int:
    """The offset token of the path (already URL-decoded): a real offset, never a sentinel."""
    offset = parse_offset(request.match_info["offset"])
    if not isinstance(offset, int):
        raise ProtocolError(ErrorCode.INVALID_OFFSET, "a snapshot offset is an offset token")
    return offset


async def publish(request: web.Request) -> web.Response:
    ref, offset = stream_ref(request), path_offset(request)
    content_type = normalize_content_type(request.headers.get("Content-Type"))
    limit = request.app[ROUTE_BODIES].limit(request)
    if request.content_length is not None and request.content_length > limit:
        raise _too_large(limit)
    meta = await request.app[SNAPSHOTS].publish(
        ref, offset, content_type or DEFAULT_CONTENT_TYPE, _body(request, limit)
    )
    headers = {"Stream-Next-Offset": encode(meta.next_offset)}
    return web.Response(status=204, headers=headers | {"Stream-Snapshot-Offset": encode(offset)})


async def _body(request: web.Request, limit: int) -> AsyncIterator[bytes]:
    """The request body chunk by chunk, refused (413) as soon as it passes `limit` bytes."""
    size = 0
    async for chunk in request.content.iter_chunked(READ_SIZE):
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        yield chunk


def _too_large(limit: int) -> ProtocolError:
    return ProtocolError(ErrorCode.PAYLOAD_TOO_LARGE, f"a snapshot is at most {limit} bytes")


async def latest(request: web.Request) -> web.Response:
    meta, pointer = request.app[SNAPSHOTS].latest(stream_ref(request))
    headers = snapshot_headers(meta, pointer)
    headers["Location"] = str(request.url.with_query(None) / encode(pointer.offset))
    return web.Response(status=307, headers=headers | {"Cache-Control": NO_STORE})


async def read(request: web.Request) -> web.StreamResponse:
    """The blob, range by range (the first fetched before answering: a blob gone is a 404)."""
    service = request.app[SNAPSHOTS]
    meta, pointer = service.at(stream_ref(request), path_offset(request))
    first = await service.first_range(pointer)
    headers = snapshot_headers(meta, pointer) | {"Content-Type": pointer.content_type}
    response = web.StreamResponse(status=200, headers=headers)
    response.content_length = pointer.size
    decorate(response, request)
    await response.prepare(request)
    try:
        await response.write(first)
        async for piece in service.rest_of(pointer):
            await response.write(piece)
    except ConnectionResetError:
        return response
    await response.write_eof()
    return response


async def delete(request: web.Request) -> web.Response:
    raise request.app[SNAPSHOTS].delete_refusal(stream_ref(request), path_offset(request))


def snapshot_headers(meta: StreamMeta, pointer: SnapshotPointer) -> dict[str, str]:
    """Where the snapshot stands: its offset, where reading resumes, whether more follows."""
    return {
        "Stream-Snapshot-Offset": encode(pointer.offset),
        "Stream-Next-Offset": encode(pointer.offset),
        "Stream-Up-To-Date": "true" if pointer.offset >= meta.next_offset else "false",
    }
