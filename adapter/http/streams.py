"""Stream routes, on `/{bucket}/{stream}` and on the flat `/v1/stream/{path}` surface."""

from __future__ import annotations

import math
import re
import time

from aiohttp import web

from adapter.http.auth import GATE, principal_of
from adapter.http.json_split import split_body
from adapter.http.keys import FANOUT, LIVE_LIMITS, STREAMS
from adapter.http.live import empty_poll_response, long_poll, sse
from adapter.http.observe import METRICS, add_log_fields
from adapter.http.peer_headers import forward_id_of
from adapter.http.peers import reader_of
from adapter.http.route_table import ROUTES, sub_resources
from adapter.protocol import json_mode
from adapter.protocol.caching import (
    NO_STORE,
    cache_control_for_read,
    if_none_match_matches,
)
from adapter.protocol.commands import Append, Chunk, CreateStream, ForkFrom, Read, StreamRef
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.headers import (
    format_expires_at,
    is_json,
    is_true,
    normalize_content_type,
    parse_expiry,
    parse_fencing_token,
    parse_producer,
    parse_stream_seq,
)
from adapter.protocol.identifiers import (
    check_compat_creatable,
    fork_source,
    split_compat_path,
    validate_bucket_id,
    validate_stream_id,
)
from adapter.protocol.model import StreamMeta
from adapter.protocol.offsets import BEGINNING, NOW, ReadFrom, Start, encode, parse_offset
from adapter.protocol.producers import ProducerPosition
from adapter.protocol.read_options import parse_at, parse_bounds
from adapter.protocol.stream_etags import range_etag, stream_etag
from adapter.service.stream_source import StreamSource
from adapter.state.records import refuse_before_newest
from topology.wire import ProducerStamp

DEFAULT_CONTENT_TYPE = "application/octet-stream"
SUB_OFFSET = re.compile(r"0|[1-9][0-9]{0,17}")


def stream_ref(request: web.Request) -> StreamRef:
    """Which stream a request names, on either surface."""
    if "path" in request.match_info:
        bucket_id, stream_id = split_compat_path(request.match_info["path"])
        return StreamRef(bucket_id, stream_id, create_bucket=True)
    bucket_id = validate_bucket_id(request.match_info["bucket"])
    return StreamRef(bucket_id, validate_stream_id(bucket_id, request.match_info["stream"]))


async def create_stream(request: web.Request) -> web.Response:
    expiry = parse_expiry(
        request.headers.get("Stream-TTL"), request.headers.get("Stream-Expires-At")
    )
    content_type = normalize_content_type(request.headers.get("Content-Type"))
    ref = stream_ref(request)
    if "path" in request.match_info:
        # Never at the URL of another stream's sub-resource, whichever the route table has.
        check_compat_creatable(request.match_info["path"], sub_resources(request.app[ROUTES]))
    fork = fork_from(request, ref)
    body = await request.read()
    limit = request.app[STREAMS].limits.max_append_messages
    command = CreateStream(
        ref=ref,
        # A fork without Content-Type inherits its source's.
        content_type=content_type or (None if fork else DEFAULT_CONTENT_TYPE),
        ttl_seconds=expiry.ttl_seconds,
        expires_at_ms=expiry.expires_at_ms,
        closed=is_true(request.headers.get("Stream-Closed")),
        body=body,
        fork=fork,
        forward_id=forward_id_of(request),
        if_match=request.headers.get("If-Match"),
        if_none_match=request.headers.get("If-None-Match"),
        split=await split_body(body, content_type, limit, initial=True),
    )
    result = await request.app[STREAMS].create(command)
    return created_response(request, result.meta, result.created)


def created_response(request: web.Request, meta: StreamMeta, created: bool) -> web.Response:
    """The answer to a stream's creation (201), or to a PUT that found it as asked (200)."""
    headers = _state_headers(meta, request.app[STREAMS].clock()) | {"ETag": stream_etag(meta)}
    if created:
        headers["Location"] = str(request.url.with_query(None))
    return web.Response(status=201 if created else 200, headers=headers)


def fork_from(request: web.Request, ref: StreamRef) -> ForkFrom | None:
    """The fork a PUT asks for (`Stream-Forked-From` and its offsets), or None."""
    source = request.headers.get("Stream-Forked-From")
    sub_offset = request.headers.get("Stream-Fork-Sub-Offset")
    if source is None:
        if sub_offset is not None:
            raise ProtocolError(ErrorCode.INVALID_HEADER, "a sub-offset needs Stream-Forked-From")
        return None
    if sub_offset is not None and not SUB_OFFSET.fullmatch(sub_offset):
        raise ProtocolError(
            ErrorCode.INVALID_HEADER, f"Stream-Fork-Sub-Offset {sub_offset!r} is not a count"
        )
    source_bucket, source_id = fork_source(source)
    if source_bucket != ref.bucket_id:
        refuse_before_newest("a fork across buckets")
    return ForkFrom(
        source_id,
        _fork_offset(request.headers.get("Stream-Fork-Offset")),
        int(sub_offset or 0),
        None if source_bucket == ref.bucket_id else source_bucket,
    )


def _fork_offset(value: str | None) -> int | None:
    """The `Stream-Fork-Offset` as a Kafka offset; None (absent, or `now`) means the tail."""
    if value is None:
        return None
    offset = parse_offset(value)
    if offset is NOW:
        return None
    return 0 if offset is BEGINNING else int(offset)


async def append(request: web.Request) -> web.Response:
    body = await request.read()
    received = time.monotonic()
    given = request.headers
    content_type = normalize_content_type(given.get("Content-Type"))
    service, ref = request.app[STREAMS], stream_ref(request)
    limit = service.limits.max_append_messages
    command = Append(
        ref=ref,
        content_type=content_type,
        body=body,
        close=is_true(given.get("Stream-Closed")),
        seq=parse_stream_seq(given.get("Stream-Seq")),
        if_match=given.get("If-Match"),
        producer=_scoped(
            request,
            parse_producer(
                given.get("Producer-Id"),
                given.get("Producer-Epoch"),
                given.get("Producer-Seq"),
            ),
        ),
        forward_id=forward_id_of(request),
        fencing_token=parse_fencing_token(given.get("Stream-Fencing-Token")),
        split=await split_body(body, content_type, limit),
    )
    result = await service.source_for(ref.bucket_id).append(command)
    if result.kafka is not None:
        kafka = result.kafka
        add_log_fields(
            request,
            kafka_topic=kafka.topic,
            kafka_partition=kafka.partition,
            kafka_offset=kafka.offset,
        )
    metrics = request.app[METRICS]
    metrics.append_seconds.observe(time.monotonic() - received)  # body in to Kafka commit
    if result.appended:  # not a duplicate of an append already written
        metrics.appended_bytes.inc(len(body))
    producer = result.producer if command.producer else None
    new_data = result.appended and bool(command.body)
    return appended_response(appended_headers(result.meta), producer, new_data)


def _scoped(request: web.Request, producer: ProducerStamp | None) -> ProducerStamp | None:
    """With auth on, a producer id is the caller's own: `<len>:<principal>:<Producer-Id>`, so
    one tenant's producer can never fence (or be taken for) another's of the same name. The
    length prefix keeps the spelling unambiguous whatever either part holds."""
    principal = principal_of(request)
    if producer is None or principal is None:
        return producer
    name = principal.name
    return producer._replace(producer_id=f"{len(name)}:{name}:{producer.producer_id}")


async def delete_stream(request: web.Request) -> web.Response:
    await request.app[STREAMS].delete(stream_ref(request), forward_id_of(request))
    return web.Response(status=204)


async def head(request: web.Request) -> web.Response:
    service = request.app[STREAMS]
    ref = stream_ref(request)
    source = service.source_for(ref.bucket_id)
    at_ms = parse_at(request.query)
    meta = await source.latest(ref)  # a HEAD does not count as an access for the sliding TTL
    headers = _state_headers(meta, service.clock())
    if at_ms is not None:  # where a read by time would start, instead of the tail
        headers["Stream-Next-Offset"] = encode(await source.offset_at(ref, at_ms))
    pointer = service.snapshot(meta)
    if pointer is not None:
        headers["Stream-Snapshot-Offset"] = encode(pointer.offset)
    etag = stream_etag(meta)
    headers |= {"Cache-Control": NO_STORE, "ETag": etag}
    # A client polling for changes with the ETag it holds learns "unchanged" as a 304.
    status = 304 if if_none_match_matches(request.headers.get("If-None-Match"), etag) else 200
    return web.Response(status=status, headers=headers)


LIVE_MODES = ("long-poll", "sse")


async def read(request: web.Request) -> web.StreamResponse:
    query = request.query
    live = query.get("live")
    if live is not None and live not in LIVE_MODES:
        raise ProtocolError(ErrorCode.INVALID_QUERY, f"live must be one of {LIVE_MODES}")
    at_ms, bounds = parse_at(query), parse_bounds(query)
    if live is not None and "offset" not in query and at_ms is None:
        raise ProtocolError(ErrorCode.INVALID_QUERY, "a live read needs an offset (or at)")
    if live == "sse" and bounds.bounded:
        raise ProtocolError(
            ErrorCode.INVALID_QUERY, "max_bytes and max_messages bound catch-up and long-poll reads"
        )
    service, ref, limits = request.app[STREAMS], stream_ref(request), request.app[LIVE_LIMITS]
    source = service.source_for(ref.bucket_id)
    start = await _start(request, source, ref, at_ms)
    if live == "sse":
        return await sse(request, service, source, request.app[FANOUT], ref, start, limits)
    if live == "long-poll":
        reads = request.app[FANOUT].reads
        chunk, meta, cursor = await long_poll(
            request, service, source, reads, ref, start, limits, bounds
        )
        if chunk is None:
            return empty_poll_response(meta, cursor)
        closed_at_tail = chunk.meta.closed and chunk.up_to_date
        return _chunk_response(request, chunk, start, {} if closed_at_tail else cursor)
    chunk = await source.read(Read(ref, start, bounds), reader_of(request))
    return _chunk_response(request, chunk, start, {})


async def _start(
    request: web.Request, source: StreamSource, ref: StreamRef, at_ms: int | None
) -> ReadFrom:
    """Where a read starts: its `offset`, or the offset of the first message appended at or
    after its `at`, so it answers exactly as a read at that offset would."""
    if at_ms is None:
        return parse_offset(request.query.get("offset"))
    return await source.offset_at(ref, at_ms)


def _chunk_response(
    request: web.Request, chunk: Chunk, start: ReadFrom, extra: dict[str, str]
) -> web.Response:
    """A 200 with the chunk's bytes (or a 304 when the client holds them already)."""
    meta = chunk.meta
    headers = _read_headers(chunk) | extra
    per_caller = _answer_per_caller(request, meta.bucket_id)
    if per_caller:
        headers["Vary"] = "Authorization"
    if start is Start.NOW:
        headers["Cache-Control"] = NO_STORE
    else:
        etag = _chunk_etag(chunk)
        headers["ETag"] = etag
        headers["Cache-Control"] = cache_control_for_read(
            has_data=bool(chunk.messages),
            closed=meta.closed and chunk.up_to_date,
            seconds_left=_seconds_left(meta, request.app[STREAMS].clock()),
            shared=not per_caller,
        )
        if if_none_match_matches(request.headers.get("If-None-Match"), etag):
            return web.Response(status=304, headers=headers)
    body = _body(meta, chunk.messages)
    return web.Response(
        status=200, body=body, headers=headers | {"Content-Type": meta.content_type}
    )


def _answer_per_caller(request: web.Request, bucket_id: str) -> bool:
    """Whether a read's answer depends on who asks (its `Authorization`): auth is on and the
    bucket is not public-read. Such an answer is only for the caller's own cache (`private`):
    a shared one keyed by URL would serve it to anyone."""
    gate = request.app[GATE]
    return gate.verifier is not None and not gate.policy.readable_by_anyone(bucket_id)


def _seconds_left(meta: StreamMeta, now_ms: int) -> int | None:
    deadline = meta.deadline_ms()
    return None if deadline is None else max(0, (deadline - now_ms) // 1000)


def _body(meta: StreamMeta, messages: list[bytes]) -> bytes:
    return json_mode.render_array(messages) if is_json(meta.content_type) else b"".join(messages)


def _chunk_etag(chunk: Chunk) -> str:
    closed = chunk.meta.closed and chunk.up_to_date
    return range_etag(chunk.meta, chunk.start, chunk.next_offset, closed)


def _read_headers(chunk: Chunk) -> dict[str, str]:
    headers = {"Stream-Next-Offset": encode(chunk.next_offset)}
    if chunk.up_to_date:
        headers["Stream-Up-To-Date"] = "true"
        if chunk.meta.closed:
            headers["Stream-Closed"] = "true"
    return headers


def appended_response(
    headers: dict[str, str], producer: ProducerPosition | None, new_data: bool
) -> web.Response:
    """An append's answer, from the stream as the append left it (`appended_headers`), the
    producer's position when it sent producer headers, and whether it wrote data (not a
    duplicate, not a bare close): also what a forwarder answers when it learned from the log
    that its silent owner wrote the append."""
    if producer is not None:
        headers["Producer-Epoch"] = str(producer.epoch)
        headers["Producer-Seq"] = str(producer.last_seq)
    # With producer headers, new data is 200 and a duplicate 204 (§5.2.1).
    return web.Response(status=200 if producer and new_data else 204, headers=headers)


def appended_headers(meta: StreamMeta) -> dict[str, str]:
    """An append's answer's headers, from the stream as the append left it: its tail, closure
    and ETag (the next conditional append's `If-Match`)."""
    return tail_headers(meta.next_offset, meta.closed) | {"ETag": stream_etag(meta)}


def tail_headers(next_offset: int, closed: bool) -> dict[str, str]:
    """A stream's tail and closure as headers: every answer that says where a stream ends."""
    headers = {"Stream-Next-Offset": encode(next_offset)}
    if closed:
        headers["Stream-Closed"] = "true"
    return headers


def _state_headers(meta: StreamMeta, now_ms: int) -> dict[str, str]:
    """Content type, tail, closure and expiry of a stream (create and HEAD)."""
    headers = tail_headers(meta.next_offset, meta.closed) | {"Content-Type": meta.content_type}
    if meta.ttl_seconds is not None:
        remaining_ms = (meta.deadline_ms() or now_ms) - now_ms
        headers["Stream-TTL"] = str(max(0, math.ceil(remaining_ms / 1000)))
    if meta.expires_at_ms is not None:
        headers["Stream-Expires-At"] = format_expires_at(meta.expires_at_ms)
    return headers
