"""The web console at `/ui/`: its static files, and the small read-only `/ui/api/`.

The files are package data (`adapter/console/static`), read once at start-up into memory:
only regular files, never through a symlink, so a request can name nothing else. Every answer
carries a CSP of `default-src 'self'`. The API adds only what the protocol lacks: the list of
buckets, a stream's Kafka topic, partition and fork lineage, seeking to the last N messages or
a moment, each message's Kafka coordinates (or, in a mounted topic, its size), which buckets
are mounted topics, and the mode (`ro` hides the write actions; `off` answers 404).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from aiohttp import web

from adapter.config import ConsoleMode
from adapter.http.keys import BUCKETS, MOUNTED, STREAMS
from adapter.http.render import json_response
from adapter.protocol.bucket_config import config_of, rendered
from adapter.protocol.commands import Read, StreamRef
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.identifiers import validate_bucket_id, validate_stream_id
from adapter.protocol.model import MountMeta, StreamMeta
from adapter.protocol.offsets import encode, parse_offset, resolve_start
from adapter.protocol.snapshots import check_readable
from adapter.service.seeking import Located, Seeker

STATIC_DIR = Path(str(files("adapter.console") / "static"))
CSP = (
    "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; "
    "object-src 'none'"
)
MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
CONSOLE_HEADERS = {
    "Content-Security-Policy": CSP,
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}
MODE = web.AppKey("console_mode", str)
SEEKER = web.AppKey("console_seeker", Seeker)
MAX_LAST = web.AppKey("console_max_last", int)
MAX_RECORDS = 1000


@dataclass(frozen=True)
class StaticFile:
    body: bytes
    content_type: str


STATIC_FILES = web.AppKey("console_files", dict[str, StaticFile])


def load_static(directory: Path = STATIC_DIR) -> dict[str, StaticFile]:
    """Every regular file below `directory` by its relative path; symlinks are never opened."""
    found: dict[str, StaticFile] = {}
    for root, dirs, names in os.walk(directory, followlinks=False):
        dirs[:] = [d for d in dirs if not (Path(root) / d).is_symlink()]
        for name in names:
            path = Path(root) / name
            media = MEDIA_TYPES.get(path.suffix)
            if media is not None and _regular(path):
                found[path.relative_to(directory).as_posix()] = StaticFile(_read(path), media)
    return found


def _regular(path: Path) -> bool:
    return stat.S_ISREG(os.lstat(path).st_mode)


def _read(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def install(app: web.Application, mode: ConsoleMode, seeker: Seeker, max_last: int) -> None:
    """What the console's handlers use (its routes are in `adapter/http/routes.py`)."""
    app[MODE] = mode
    app[SEEKER] = seeker
    app[MAX_LAST] = max_last
    app[STATIC_FILES] = {} if mode == "off" else load_static()


async def off(_: web.Request) -> web.Response:
    raise ProtocolError(ErrorCode.NOT_FOUND, "the console is off (console = off)")


async def to_index(_: web.Request) -> web.Response:
    raise web.HTTPPermanentRedirect("/ui/")


async def no_api(request: web.Request) -> web.Response:
    raise ProtocolError(ErrorCode.NOT_FOUND, f"no console API at {request.path}")


async def static(request: web.Request) -> web.Response:
    name = request.match_info["name"] or "index.html"
    found = request.app[STATIC_FILES].get(name)
    if found is None:
        raise ProtocolError(ErrorCode.NOT_FOUND, f"no console file {name!r}")
    headers = CONSOLE_HEADERS | {"Content-Type": found.content_type}
    return web.Response(body=found.body, headers=headers)


async def config(request: web.Request) -> web.Response:
    return _api({"mode": request.app[MODE]})


async def buckets(request: web.Request) -> web.Response:
    """Every bucket and mounted topic, by id; a bucket with its configuration (age retention),
    a mount with its topic and key encoding (its retention is the topic's own: null)."""
    buckets = request.app[BUCKETS]
    listed: list[dict[str, object]] = [
        {"bucket_id": meta.bucket_id, "streams": buckets.live_count(meta.bucket_id), "mount": None}
        | rendered(config_of(meta))
        for meta in map(buckets.get, buckets.catalog.bucket_ids())
    ]
    mounted = request.app[MOUNTED]
    for mount in mounted.catalog.mounts():
        indexed = mounted.indexes.get(mount.bucket_id)
        streams = len(indexed.index) if indexed is not None else None
        listed.append(
            {"bucket_id": mount.bucket_id, "streams": streams, "retention": None} | _mount(mount)
        )
    return _api({"buckets": sorted(listed, key=lambda bucket: str(bucket["bucket_id"]))})


def _mount(mount: MountMeta | None) -> dict[str, object]:
    """What the console shows of a mount: its topic, how keys name streams, whether it takes
    appends (a bucket that is not a mount: `mount` null)."""
    if mount is None:
        return {"mount": None}
    facts = {"topic": mount.topic, "key_encoding": mount.key_encoding, "appends": mount.appends}
    return {"mount": facts}


def _topic(request: web.Request, meta: StreamMeta) -> str:
    mount = request.app[MOUNTED].catalog.mount(meta.bucket_id)
    return mount.topic if mount is not None else request.app[BUCKETS].topic(meta.data_bucket)


def _no_seek_in_mounts(request: web.Request, meta: StreamMeta) -> None:
    if request.app[MOUNTED].covers(meta.bucket_id):
        raise ProtocolError(
            ErrorCode.INVALID_QUERY, "a mounted topic's streams start from an offset only"
        )


async def _meta(request: web.Request) -> StreamMeta:
    bucket_id = validate_bucket_id(request.match_info["b"])
    ref = StreamRef(bucket_id, validate_stream_id(bucket_id, request.match_info["s"]))
    return await request.app[STREAMS].source_for(bucket_id).latest(ref)  # at its tail as of now


def _count(request: web.Request, name: str, most: int, setting: str = "") -> int | None:
    """The query's count `name`, 1 to `most` (`setting`: the setting that says `most`)."""
    raw = request.query.get(name)
    if raw is None:
        return None
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= most:
        bound = f" ({setting})" if setting else ""
        message = f"{name} must be an integer in 1..{most}{bound}"
        raise ProtocolError(ErrorCode.INVALID_QUERY, message)
    return int(raw)


async def seek(request: web.Request) -> web.Response:
    """`?last=N`: the offset N messages before the tail; `?time=MS`: the first offset written
    at or after that moment (milliseconds since the epoch). Never below the earliest offset."""
    meta = await _meta(request)
    _no_seek_in_mounts(request, meta)
    topic = request.app[BUCKETS].topic(meta.data_bucket)
    last = _count(request, "last", request.app[MAX_LAST], "console_max_last")
    moment = _count(request, "time", 2**53)
    if (last is None) == (moment is None):
        raise ProtocolError(ErrorCode.INVALID_QUERY, "give exactly one of last=N or time=MS")
    seeker = request.app[SEEKER]
    if last is not None:
        offset = await seeker.last(topic, meta, last)
    else:
        offset = await seeker.at_time(topic, meta, moment or 0)
    return _api({"offset": encode(max(offset, meta.earliest_offset))})


async def records(request: web.Request) -> web.Response:
    """The Kafka coordinates (topic, partition, offset, timestamp) of up to `limit` messages
    from `offset` on: one record per message; `next_offset` follows the last one listed.
    A mounted topic's stream gives only the sizes of the messages one read returns."""
    meta = await _meta(request)
    start = parse_offset(request.query.get("offset"))
    limit = _count(request, "limit", MAX_RECORDS) or 100
    body: dict[str, object] = {"topic": _topic(request, meta), "partition": meta.partition}
    if request.app[MOUNTED].covers(meta.bucket_id):
        ref = StreamRef(meta.bucket_id, meta.stream_id)
        chunk = await request.app[STREAMS].source_for(ref.bucket_id).read(Read(ref, start))
        sizes = [{"bytes": len(message)} for message in chunk.messages]
        return _api(body | {"records": sizes, "next_offset": encode(chunk.next_offset)})
    check_readable(meta, start)
    position = resolve_start(meta, start)
    found = await request.app[SEEKER].located(str(body["topic"]), meta, position, limit)
    records = [_record(located) for located in found]
    following = records[-1]["next_offset"] if records else None
    return _api(body | {"records": records, "next_offset": following})


def _record(located: Located) -> dict[str, object]:
    position = located.position
    return {
        "offset": encode(position.offset),
        "next_offset": encode(position.offset + 1),
        "kafka_offset": position.offset,
        "timestamp_ms": position.timestamp_ms,
        "bytes": position.size,
        "written_by": located.stream_id,
    }


async def stream(request: web.Request) -> web.Response:
    """Where the stream lives in Kafka, where it was forked from (nearest source first, up
    to the root) and its own forks."""
    meta = await _meta(request)
    bucket_id = meta.bucket_id
    catalog = request.app[BUCKETS].catalog
    sources: list[dict[str, object]] = []
    current: StreamMeta | None = meta
    while current is not None and current.source is not None:
        sources.append(_fork_point(current))
        current = catalog.stream(*current.source)
    forks = [_fork_point(fork) for fork in catalog.forks_of(bucket_id, meta.stream_id)]
    body = {
        "bucket_id": bucket_id,
        "stream_id": meta.stream_id,
        "topic": _topic(request, meta),
        "partition": meta.partition,
        **_mount(request.app[MOUNTED].catalog.mount(bucket_id)),
        "history_start": encode(meta.history_start),
        "earliest_offset": encode(meta.earliest_offset),
        "sources": sources,
        "forks": forks,
    }
    return _api(body)


def _fork_point(meta: StreamMeta) -> dict[str, object]:
    """A fork: its id, its source and the offset it branched at."""
    offset = meta.fork_offset
    source = meta.source
    return {
        "stream_id": meta.stream_id,
        "bucket_id": meta.bucket_id,
        "forked_from": meta.forked_from,
        "source_bucket": None if source is None else source[0],
        "fork_offset": None if offset is None else encode(offset),
        "soft_deleted": meta.soft_deleted,
    }


def _api(body: object) -> web.Response:
    return json_response(body, headers={"Cache-Control": "no-store"})
