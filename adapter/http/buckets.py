"""Bucket routes: `PUT/GET/DELETE /{bucket}` and `GET /{bucket}/streams`."""

from __future__ import annotations

from aiohttp import web

from adapter.http.keys import BUCKETS
from adapter.http.render import json_response
from adapter.http.request_checks import defer_continue
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.identifiers import validate_bucket_id
from adapter.protocol.offsets import encode
from adapter.state.records import StreamMeta

MAX_LIMIT = 1000

routes = web.RouteTableDef()


def _bucket_id(request: web.Request) -> str:
    return validate_bucket_id(request.match_info["bucket"])


@routes.put("/{bucket}", expect_handler=defer_continue)
async def create_bucket(request: web.Request) -> web.Response:
    meta = await request.app[BUCKETS].create(_bucket_id(request))
    body = {"bucket_id": meta.bucket_id, "streams": 0, "created_at_ms": meta.created_at_ms}
    return json_response(body, status=201, headers={"Location": str(request.url.with_query(None))})


@routes.get("/{bucket}", expect_handler=defer_continue)
async def get_bucket(request: web.Request) -> web.Response:
    buckets = request.app[BUCKETS]
    meta = buckets.get(_bucket_id(request))
    body = {
        "bucket_id": meta.bucket_id,
        "streams": buckets.live_count(meta.bucket_id),
        "created_at_ms": meta.created_at_ms,
        "topic": meta.topic,
        "partitions": meta.partitions,
    }
    return json_response(body, headers={"Cache-Control": "no-store"})


@routes.delete("/{bucket}", expect_handler=defer_continue)
async def delete_bucket(request: web.Request) -> web.Response:
    await request.app[BUCKETS].delete(_bucket_id(request))
    return web.Response(status=204)


@routes.get("/{bucket}/streams", expect_handler=defer_continue)
async def list_streams(request: web.Request) -> web.Response:
    bucket_id = _bucket_id(request)
    prefix = request.query.get("prefix", "")
    after = request.query.get("after")
    limit = _limit(request.query.get("limit"))
    page = request.app[BUCKETS].page(bucket_id, prefix, after, limit)
    body = {
        "bucket_id": page.bucket_id,
        "prefix": page.prefix,
        "stream_count": len(page.streams),
        "streams": [_summary(meta) for meta in page.streams],
        "next_cursor": page.next_cursor,
        "has_more": page.next_cursor is not None,
    }
    return json_response(body, headers={"Cache-Control": "no-store"})


def _limit(raw: str | None) -> int:
    if raw is None:
        return MAX_LIMIT
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= MAX_LIMIT:
        raise ProtocolError(ErrorCode.INVALID_QUERY, f"limit must be an integer in 1..{MAX_LIMIT}")
    return int(raw)


def _summary(meta: StreamMeta) -> dict[str, object]:
    return {
        "stream_id": meta.stream_id,
        "status": "Closed" if meta.closed else "Open",
        "content_type": meta.content_type,
        "tail_offset": encode(meta.next_offset),
        "created_at_ms": meta.created_at_ms,
        "last_write_at_ms": meta.last_write_at_ms,
    }
