"""Bucket routes: `PUT/GET/DELETE /{bucket}`, `PUT /{bucket}/config` and `GET
/{bucket}/streams`, for buckets and mounted topics alike."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from adapter.http.keys import BUCKETS, MOUNTED, MOUNTS, STREAMS
from adapter.http.render import json_response
from adapter.http.request_checks import require_utf8_query
from adapter.protocol.bucket_config import (
    BucketConfig,
    bucket_etag,
    config_of,
    parse_config,
    rendered,
)
from adapter.protocol.commands import StreamRef
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.headers import is_json, normalize_content_type
from adapter.protocol.identifiers import validate_bucket_id, validate_listing_position
from adapter.protocol.json_bodies import read_json
from adapter.protocol.model import BucketMeta, MountMeta, StreamMeta
from adapter.protocol.mounts import MountSpec, invalid, parse_mount
from adapter.protocol.offsets import encode

MAX_LIMIT = 1000
# How long a mount's PUT waits for the mount to serve reads (its index caught up with the
# topic) before answering 202 instead of 201: a small topic is indexed well within it.
MOUNT_READY_S = 5.0


def _bucket_id(request: web.Request) -> str:
    return validate_bucket_id(request.match_info["bucket"])


async def create_bucket(request: web.Request) -> web.Response:
    bucket_id = _bucket_id(request)
    location = {"Location": str(request.url.with_query(None))}
    asked = await _bucket_request(request)
    if isinstance(asked, MountSpec):
        mount = await request.app[MOUNTS].mount(bucket_id, asked)
        return await mounted_response(request, mount, location)
    meta = await request.app[BUCKETS].create(bucket_id, asked)
    body = {"bucket_id": meta.bucket_id, "streams": 0, "created_at_ms": meta.created_at_ms}
    body |= rendered(config_of(meta))
    return json_response(body, status=201, headers=location | _etag(meta))


async def configure_bucket(request: web.Request) -> web.Response:
    """Replace the bucket's configuration (the whole of it); `If-Match` makes it conditional."""
    bucket_id = _bucket_id(request)
    config = parse_config(read_json(await request.read(), "bucket configuration"))
    if_match = request.headers.get("If-Match")
    meta = await request.app[BUCKETS].configure(bucket_id, config, if_match)
    return json_response(rendered(config_of(meta)), headers=_etag(meta) | _NO_STORE)


def _etag(meta: BucketMeta) -> dict[str, str]:
    return {"ETag": bucket_etag(meta)}


_NO_STORE = {"Cache-Control": "no-store"}


async def mounted_response(
    request: web.Request, mount: MountMeta, headers: dict[str, str]
) -> web.Response:
    """201 once the mount serves reads, so a read right after the PUT gets the topic's
    records; 202 with `Retry-After` if its index is still catching up at `MOUNT_READY_S`
    (the mount exists either way; its `index` says how far indexing is)."""
    serving = await request.app[MOUNTED].until_serving(mount.bucket_id, MOUNT_READY_S)
    if not serving:
        headers = headers | {"Retry-After": "1"}
    body = _mount_body(request, mount)
    return json_response(body, status=201 if serving else 202, headers=headers)


async def _bucket_request(request: web.Request) -> MountSpec | BucketConfig | None:
    """What a `PUT /{bucket}` asks for: a mount (a JSON body `{"mount": {...}}`), a bucket
    with a configuration (`{"retention": {...}}`), or a plain bucket (no JSON body)."""
    body = await request.read()
    content_type = normalize_content_type(request.headers.get("Content-Type"))
    if not body or content_type is None or not is_json(content_type):
        return None  # a plain bucket: any other body is ignored, as it always was
    document = read_json(body, "bucket body")
    if isinstance(document, dict) and "mount" in document:
        if set(document) != {"mount"}:
            raise invalid('a mount\'s body must be {"mount": {...}} alone')
        return parse_mount(document["mount"])
    return parse_config(document)


async def get_bucket(request: web.Request) -> web.Response:
    bucket_id = _bucket_id(request)
    mount = request.app[MOUNTS].get(bucket_id)
    if mount is not None:
        return json_response(_mount_body(request, mount), headers={"Cache-Control": "no-store"})
    buckets = request.app[BUCKETS]
    meta = buckets.get(bucket_id)
    body = {
        "bucket_id": meta.bucket_id,
        "streams": buckets.live_count(meta.bucket_id),
        "created_at_ms": meta.created_at_ms,
        "topic": meta.topic,
        "partitions": meta.partitions,
        "mounted": False,
    }
    body |= rendered(config_of(meta))
    return json_response(body, headers=_NO_STORE | _etag(meta))


def _mount_body(request: web.Request, mount: MountMeta) -> dict[str, Any]:
    body: dict[str, Any] = {
        "bucket_id": mount.bucket_id,
        "created_at_ms": mount.created_at_ms,
        "topic": mount.topic,
        "mounted": True,
        "mount": {
            "topic": mount.topic,
            "content_type": mount.content_type,
            "content_type_header": mount.content_type_header,
            "key_encoding": mount.key_encoding,
            "appends": mount.appends,
        },
    }
    indexed = request.app[MOUNTED].indexes.get(mount.bucket_id)
    if indexed is not None:
        progress = indexed.indexer.progress()
        body |= {"streams": len(indexed.index), "partitions": progress["partitions"]}
        body["index"] = {"caught_up": indexed.indexer.caught_up} | progress
        body["index"] |= indexed.index.counts.as_dict()
    return body


async def delete_bucket(request: web.Request) -> web.Response:
    bucket_id = _bucket_id(request)
    if request.app[MOUNTS].get(bucket_id) is not None:
        await request.app[MOUNTS].unmount(bucket_id)
    else:
        await request.app[BUCKETS].delete(bucket_id)
    return web.Response(status=204)


async def list_streams(request: web.Request) -> web.Response:
    bucket_id = _bucket_id(request)
    require_utf8_query(request.rel_url.raw_query_string)
    prefix = validate_listing_position("prefix", request.query.get("prefix", ""))
    after = _after(request.query.get("after"))
    limit = _limit(request.query.get("limit"))
    if request.app[MOUNTS].get(bucket_id) is not None:
        summaries, cursor = _mounted_page(request, bucket_id, prefix, after, limit)
    else:
        page = request.app[BUCKETS].page(bucket_id, prefix, after, limit)
        listed = await request.app[STREAMS].native.listed(page.streams)
        summaries, cursor = [_summary(meta) for meta in listed], page.next_cursor
    body = {
        "bucket_id": bucket_id,
        "prefix": prefix,
        "stream_count": len(summaries),
        "streams": summaries,
        "next_cursor": cursor,
        "has_more": cursor is not None,
    }
    return json_response(body, headers={"Cache-Control": "no-store"})


def _mounted_page(
    request: web.Request, bucket_id: str, prefix: str, after: str | None, limit: int
) -> tuple[list[dict[str, object]], str | None]:
    """A page of a mount's keys (stream ids), in order, and the cursor of the next one."""
    mounted = request.app[MOUNTED]
    index = mounted.indexed(bucket_id).index
    ids = []
    for stream_id in index.ids(prefix, after):
        ids.append(stream_id)
        if len(ids) > limit:
            break
    more = len(ids) > limit
    summaries = [
        _summary(mounted.existing(StreamRef(bucket_id, stream_id))) for stream_id in ids[:limit]
    ]
    return summaries, (ids[limit - 1] if more else None)


def _after(raw: str | None) -> str | None:
    return None if raw is None else validate_listing_position("after", raw)


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
