"""Forwarding writes to the owner of their write slot, at the HTTP edge.

Every instance accepts every request. A write (PUT, POST, DELETE of a stream or a bucket) whose
slot another instance owns is sent there as it came (method, path and query, headers, body; a
coded body decoded, as the owner stores it) with `Durable-Kafka-Forwarded: 1`, and the owner's
answer is returned unchanged. A forwarded request is never forwarded again: an instance that
gets one for a slot it does not own answers 503 (ownership is moving), as it does while nobody
owns the slot. After a successful forwarded stream write, the answer waits (bounded) until the
local catalog shows it, so a client reading through this instance next sees its own write.

An append is forwarded with a forward id (`Durable-Kafka-Forward-Id`) that the owner writes on
its records. If the owner goes silent after it may have committed (killed, stopped, its
connection cut), the answer is what the log says once the slot's next owner has fenced it
(`adapter/service/forwarded.py`): the append's real success, a 503 when it is not there, and
504 `outcome_unknown` only when no instance took the slot over in time.
"""

from __future__ import annotations

import asyncio
import logging

import aiohttp
from aiohttp import hdrs, web
from multidict import CIMultiDict

from adapter.cluster.routing import Forward, Local, Router
from adapter.http.bodies import ROUTE_BODIES
from adapter.http.buckets import MOUNT_READY_S
from adapter.http.forward_ids import FORWARD_ID, FORWARDED, LAST_ACCESS
from adapter.http.keys import BUCKETS, MOUNTED, STREAMS
from adapter.http.observe import REQUEST_ID, REQUEST_ID_HEADER
from adapter.http.owners import FORWARDER, copied, described_by, forwarded
from adapter.http.render import Handler
from adapter.http.streams import created_response, fork_from, stream_ref
from adapter.log.errors import LogUnavailable, OutcomeUnknown
from adapter.protocol.commands import StreamRef
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.identifiers import validate_bucket_id
from adapter.protocol.offsets import encode, parse_offset
from adapter.protocol.snapshots import EARLIEST_HEADER
from adapter.service.forwarded import ForwardedOutcomes, Sent

log = logging.getLogger(__name__)

WRITES = frozenset({"PUT", "POST", "DELETE"})
READS = frozenset({"GET", "HEAD"})
# The routes a sibling worker's read is synchronised on (`_sibling_sync`).
_STREAM_ROUTES = frozenset({"/v1/stream/{path}", "/{bucket}/{stream}"})
READ_YOUR_WRITES_S = 2.0
ROUTER = web.AppKey("router", Router)
OUTCOMES = web.AppKey("forwarded_outcomes", ForwardedOutcomes)
_CAUGHT_UP = web.RequestKey("caught_up", bool)  # this request followed the meta topic


@web.middleware
async def forwarding_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    router = request.app[ROUTER]
    if request.method in WRITES and not router.writers.accepting_all():
        await _know_the_stream(request)
    slot = _write_slot(request)
    if slot is None:
        if request.app[FORWARDER].siblings and request.method in READS:
            if FORWARDED in request.headers:
                return _with_last_access(request, await handler(request))
            await _sibling_sync(request)
        return await handler(request)
    route = router.route(slot)
    if isinstance(route, Local):
        if request.method == "PUT" and not router.writers.accepting_all():
            await _know_the_name(request)
        return await handler(request)
    if not isinstance(route, Forward) or FORWARDED in request.headers:
        raise ProtocolError(
            ErrorCode.UNAVAILABLE, f"write slot {slot} is changing owner; retry shortly"
        )
    response = await _forward(request, route)
    if response.status < 300:
        await _read_your_writes(request, response)
    return response


async def _sibling_sync(request: web.Request) -> None:
    """A read of a stream whose slot a sibling worker owns (`serve --workers`) is served here
    once this worker's catalog shows the stream as the owner does now: a client whose
    connections land on different workers reads its own writes, as from one process.

    The owner is asked over its Unix socket as the read would ask it: `GET ?offset=now` (an
    access: it renews a sliding TTL there too, where expiry is decided) or `HEAD` (not one).
    Its answer carries its last access to the stream, adopted here when later than ours: a
    read the owner served renewed the stream for every worker, not just for itself.
    A stream this worker does not know is asked of every sibling (its slot is not known: a
    fork's is its source's). Any failure to ask leaves the read to this worker's catalog as
    it is, as between instances."""
    ref = _stream_route_ref(request)
    if FORWARDED in request.headers or ref is None:
        return
    streams, siblings = request.app[STREAMS], request.app[FORWARDER].siblings
    if streams.catalog.mount(ref.bucket_id) is not None:
        return  # a mount's streams are indexed by every worker from the topic itself
    if streams.catalog.stream(ref.bucket_id, ref.stream_id) is None:
        owners = list(siblings)
    else:
        route = request.app[ROUTER].route(streams.slot_of(ref.bucket_id, ref.stream_id))
        if not isinstance(route, Forward) or route.url not in siblings:
            return
        owners = [route.url]
    answers = await asyncio.gather(*(described_by(request, url) for url in owners))
    found = [a for a in answers if a is not None and (a.tail is not None or a.gone)]
    described = found[0] if found else answers[0] if len(owners) == 1 else None
    if described is not None:
        tail, closed, gone = described.tail, described.closed, described.gone
        if not await streams.reflects(ref, tail, closed, READ_YOUR_WRITES_S, gone):
            log.info("a sibling's %s not seen locally within %.1fs", ref, READ_YOUR_WRITES_S)
        at_ms = described.last_access_ms
        if request.method == "GET" and tail is not None:
            # The owner counted this read as an access (its renewals by reads reach this
            # worker only with the stream's next write): count it here too, before the
            # handler judges whether a sliding TTL has run out.
            at_ms = max(at_ms or 0, streams.clock())
        if at_ms is not None:
            streams.accessed_elsewhere(ref, at_ms)


def _with_last_access(request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
    """A sibling's synchronising read (`described_by`), answered with this worker's last
    access to the stream, which renewed its sliding TTL for every worker."""
    ref = None if response.prepared else _stream_route_ref(request)
    if ref is None:
        return response
    meta = request.app[STREAMS].catalog.stream(ref.bucket_id, ref.stream_id)
    if meta is not None and meta.ttl_seconds is not None:
        response.headers[LAST_ACCESS] = str(meta.last_access_ms)
    return response


def _stream_route_ref(request: web.Request) -> StreamRef | None:
    """The stream a request on a stream's own route names; None on any other route, or for a
    name the handler will refuse as it would anyway."""
    resource = request.match_info.route.resource
    if resource is None or resource.canonical not in _STREAM_ROUTES:
        return None
    try:
        return stream_ref(request)
    except ProtocolError:
        return None


async def _know_the_stream(request: web.Request) -> None:
    """A write's slot is found in the catalog (a fork's is its source's, whatever its own id
    hashes to): an instance or worker that does not know the stream a write names — or the
    source a fork names — follows the meta topic to what is written in it now before it routes
    the write, since another instance or a sibling may have just made it (a fork made through
    one instance and appended to through another at once would otherwise be routed by its own
    id to a slot that is not its own: 404 or 503). Concurrent waits share one query of the
    topic's end (`MetaFollower.seen_written`): a few round trips when caught up. An instance
    that takes every slot's writes skips it: nothing it has not seen can have been made."""
    info = request.match_info
    if FORWARDED in request.headers or ("path" not in info and "stream" not in info):
        return
    try:
        ref = stream_ref(request)
        fork = fork_from(request, ref) if request.method == "PUT" else None
    except ProtocolError:
        return  # the handler refuses it as it would
    if request.method == "PUT":
        named = None if fork is None else fork.source_of(ref)
    else:
        named = None if "offset" in info else (ref.bucket_id, ref.stream_id)
    if named is not None:
        await _catch_up_unless_known(request, *named)


async def _know_the_name(request: web.Request) -> None:
    """A stream id is placed in two ways: a new stream in the slot its id hashes to, a fork in
    its source's. So the owner deciding a creation may not be the one that made a stream of
    that name: one made through another owner a moment ago (a fork of the same name, or a
    plain stream a fork now names) must be seen before this one is created over it (409, or
    the same stream again), so an owner that does not know the name catches up first. Only
    two creations of one name racing through two owners can still both succeed (the later
    record wins); see docs/explanation/limits.md, "Limits"."""
    info = request.match_info
    if "offset" in info or ("path" not in info and "stream" not in info):
        return  # a snapshot or a bucket: its slot alone decides
    try:
        ref = stream_ref(request)
    except ProtocolError:
        return  # the handler refuses it as it would
    await _catch_up_unless_known(request, ref.bucket_id, ref.stream_id)


async def _catch_up_unless_known(request: web.Request, bucket_id: str, stream_id: str) -> None:
    """Follow the meta topic to what is written in it now, unless the catalog knows the
    stream (or its bucket is a mount, indexed from its topic) or this request caught up
    already (a fork naming an unknown source, then its own name)."""
    catalog = request.app[STREAMS].catalog
    if request.get(_CAUGHT_UP) or catalog.mount(bucket_id) is not None:
        return
    if catalog.stream(bucket_id, stream_id) is not None:
        return
    request[_CAUGHT_UP] = True
    try:
        await request.app[FORWARDER].catch_up()
    except LogUnavailable as error:
        log.info("catching up before a write naming %s/%s: %s", bucket_id, stream_id, error)


def _write_slot(request: web.Request) -> int | None:
    """The slot a write request changes; None for reads and routes that write nothing."""
    if request.method not in WRITES:
        return None
    if request.method == "DELETE" and "offset" in request.match_info:
        return None  # deleting a snapshot is always refused: it writes nothing
    info = request.match_info
    if "path" in info or "stream" in info:
        ref = stream_ref(request)
        if request.app[STREAMS].catalog.mount(ref.bucket_id) is not None:
            return None  # a mount's streams are read-only: refused here, not forwarded
        fork = fork_from(request, ref) if request.method == "PUT" else None
        source = fork.source_of(ref) if fork is not None else None
        return request.app[STREAMS].slot_of(ref.bucket_id, ref.stream_id, source)
    if "bucket" in info:
        return request.app[BUCKETS].slots.of_bucket(validate_bucket_id(info["bucket"]))
    return None


async def _forward(request: web.Request, route: Forward) -> web.Response:
    headers = forwarded(request, route.url)
    if (request_id := request.get(REQUEST_ID)) is not None:
        headers[REQUEST_ID_HEADER] = request_id  # one id in both instances' logs
    url = route.url + request.rel_url.raw_path_qs
    sent = _tagged(request, route, headers)
    # A streamed body (a snapshot, up to max_snapshot_bytes) is passed on as it arrives, never
    # held whole; other bodies are read first (bounded by their route's limit).
    body = request.content if request.app[ROUTE_BODIES].streamed(request) else await request.read()
    # aiohttp gives a body without a Content-Type one (application/octet-stream): the owner
    # must judge the request as it came (a missing Content-Type is 400, a wrong one 409).
    # The owner codes its answer as the client asked, or not at all: never as aiohttp would.
    skip = tuple(h for h in (hdrs.CONTENT_TYPE, hdrs.ACCEPT_ENCODING) if h not in headers)
    session = request.app[FORWARDER].session(route.url)
    try:
        async with session.request(
            request.method,
            url,
            headers=headers,
            data=body,
            allow_redirects=False,
            skip_auto_headers=skip,
        ) as reply:
            payload = await reply.read()
            return web.Response(status=reply.status, headers=copied(reply.headers), body=payload)
    except (aiohttp.ClientError, TimeoutError) as error:
        # Even a failure to connect may follow a request sent: aiohttp retries an idempotent
        # request (PUT, DELETE) on a new connection when a kept-alive one drops.
        log.warning("forwarding to %s (slot %d) failed: %s", route.url, route.slot, error)
        if sent is None:
            raise ProtocolError(
                ErrorCode.UNAVAILABLE, f"the owner of write slot {route.slot} did not answer; retry"
            ) from error
        return await _learned(request, sent)


def _tagged(request: web.Request, route: Forward, headers: CIMultiDict[str]) -> Sent | None:
    """For a stream's append, creation or deletion: what to look for if the owner goes silent
    (its id goes in `headers`). Snapshot publishes, fences, trims and bucket writes are not
    tagged."""
    info = request.match_info
    if (
        _is_publish(request)
        or _state_only(request)
        or ("path" not in info and "stream" not in info)
    ):
        return None
    sent = request.app[OUTCOMES].sent(stream_ref(request), route.slot)
    headers[FORWARD_ID] = sent.forward_id
    return sent


async def _learned(request: web.Request, sent: Sent) -> web.Response:
    """The answer to a write whose owner went silent: what the log says became of it."""
    found = await request.app[OUTCOMES].learn(sent)
    if found is None:
        raise OutcomeUnknown(
            f"the owner of write slot {sent.slot} went silent and no instance took the slot "
            "over in time: this write may or may not have happened"
        )
    if not found.written:
        raise ProtocolError(
            ErrorCode.UNAVAILABLE,
            f"the owner of write slot {sent.slot} stopped before writing this request: "
            "nothing was written; retry",
        )
    log.warning("forwarded write %s was written before its owner went silent", sent.forward_id)
    if request.method == "DELETE":
        return web.Response(status=204)
    if request.method == "PUT":
        return await _created(request, sent)
    headers = {"Stream-Next-Offset": encode(found.tail)}
    if found.closed:
        headers["Stream-Closed"] = "true"
    status = 204
    epoch, seq = request.headers.get("Producer-Epoch"), request.headers.get("Producer-Seq")
    if "Producer-Id" in request.headers and epoch is not None and seq is not None:
        headers |= {"Producer-Epoch": epoch, "Producer-Seq": seq}
        status = 200 if found.last_data is not None else 204
    return web.Response(status=status, headers=headers)


async def _created(request: web.Request, sent: Sent) -> web.Response:
    """A creation the silent owner wrote: answered from this instance's catalog once it shows
    the stream (the follower brings it; the learning caught up already when it was new)."""
    service = request.app[STREAMS]
    await service.applied(sent.ref, 0, READ_YOUR_WRITES_S)
    meta = service.catalog.stream(sent.ref.bucket_id, sent.ref.stream_id)
    if meta is None:  # created, then deleted by another request meanwhile
        raise ProtocolError(ErrorCode.STREAM_NOT_FOUND, f"stream {sent.ref.stream_id!r} is gone")
    return created_response(request, meta, created=True)


def _is_publish(request: web.Request) -> bool:
    return request.method == "PUT" and "offset" in request.match_info


def _state_only(request: web.Request) -> bool:
    """A fence or a trim writes no record to learn its outcome by: a silent owner's answer is
    503/504."""
    resource = request.match_info.route.resource
    return resource is not None and resource.canonical.endswith(("/fence", "/trim"))


async def _read_your_writes(request: web.Request, response: web.Response) -> None:
    """Hold the answer until this instance's catalog reflects the forwarded write."""
    if "path" not in request.match_info and "stream" not in request.match_info:
        await _bucket_applied(request, response)
        return
    ref = stream_ref(request)
    if _is_publish(request):  # a publish moves no tail: wait for its pointer
        await _snapshot_applied(request, ref)
        return
    if (earliest := response.headers.get(EARLIEST_HEADER)) is not None:  # a trim's answer
        await _trim_applied(request, ref, earliest)
        return
    if request.method == "DELETE":
        tail = None
    elif (token := response.headers.get("Stream-Next-Offset")) is not None:
        offset = parse_offset(token)
        tail = offset if isinstance(offset, int) else None
    else:
        return
    if not await request.app[STREAMS].applied(ref, tail, READ_YOUR_WRITES_S):
        log.info("forwarded write to %s not seen locally within %.1fs", ref, READ_YOUR_WRITES_S)


async def _snapshot_applied(request: web.Request, ref: StreamRef) -> None:
    offset = parse_offset(request.match_info["offset"])
    if not isinstance(offset, int):
        return
    if not await request.app[STREAMS].snapshot_applied(ref, offset, READ_YOUR_WRITES_S):
        log.info("forwarded publish to %s not seen locally within %.1fs", ref, READ_YOUR_WRITES_S)


async def _trim_applied(request: web.Request, ref: StreamRef, earliest: str) -> None:
    offset = parse_offset(earliest)
    if not isinstance(offset, int):
        return
    if not await request.app[STREAMS].trim_applied(ref, offset, READ_YOUR_WRITES_S):
        log.info("forwarded trim of %s not seen locally within %.1fs", ref, READ_YOUR_WRITES_S)


async def _bucket_applied(request: web.Request, response: web.Response) -> None:
    """Hold the answer until this instance's catalog shows the bucket (or mount) made or
    gone, or its configuration as the answer's ETag names it; a mount made, until this
    instance's own index of it serves reads too (each instance indexes the topic itself):
    else the owner's 201 becomes 202, as it would have been answered here."""
    bucket_id = request.match_info["bucket"]
    exists = request.method == "PUT"
    etag = response.headers.get("ETag") if response.status < 300 else None
    await request.app[STREAMS].bucket_applied(bucket_id, exists, READ_YOUR_WRITES_S, etag)
    mounted = request.app[MOUNTED]
    if not (exists and response.status == 201 and mounted.covers(bucket_id)):
        return
    if not await mounted.until_serving(bucket_id, MOUNT_READY_S):
        response.set_status(202)
        response.headers["Retry-After"] = "1"
