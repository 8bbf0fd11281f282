"""Forwarding writes to the owner of their write slot, at the HTTP edge.

Every instance accepts every request; the cluster's coordinator (`adapter/cluster/coordinator.py`)
decides, once before each write, where it is carried out, and synchronises a sibling worker's
read once before it is served. This module carries out its answers over HTTP. A write whose
slot another instance owns is sent there as it came (method, path and query, headers, body; a
coded body decoded, as the owner stores it) with `Durable-Kafka-Forwarded: 1`, and the owner's
answer is returned unchanged. A forwarded request is never forwarded again: an instance that
gets one for a slot it does not own answers 503 (ownership is moving), as it does while nobody
owns the slot. After a successful forwarded write, the answer waits (bounded) until the local
catalog shows what the owner says it changed (`Durable-Kafka-Effect`, `adapter/cluster/
effects.py`; `Coordinator.after_forward`), so a client reading through this instance next sees
its own write.

An append is forwarded with a forward id (`Durable-Kafka-Forward-Id`) that the owner writes on
its records. If the owner goes silent after it may have committed (killed, stopped, its
connection cut), the answer is what the log says once the slot's next owner has fenced it
(`adapter/service/unanswered_writes.py`): the append's real success, a 503 when it is not
there, and 504 `outcome_unknown` only when no instance took the slot over in time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from dataclasses import replace
from functools import partial

import aiohttp
from aiohttp import hdrs, web
from multidict import CIMultiDict

from adapter.cluster import effects
from adapter.cluster.coordinator import (
    SHOWN_WAIT_S,
    BucketChanged,
    Change,
    Coordinator,
    SnapshotPublished,
    TailMoved,
    Trimmed,
    Write,
)
from adapter.cluster.dead_owners import SILENT_AFTER_S
from adapter.cluster.routing import ROUTED_UNDER, Forward, Local, Moving, Route
from adapter.http.bodies import ROUTE_BODIES
from adapter.http.buckets import MOUNT_READY_S
from adapter.http.keys import MOUNTED, STREAMS
from adapter.http.observe import REQUEST_ID, REQUEST_ID_HEADER
from adapter.http.peer_headers import (
    EFFECT,
    FORWARD_ID,
    FORWARDED,
    LAST_ACCESS,
    OWNER_MARK,
    owner_mark_of,
)
from adapter.http.peers import PEERS, Hop, copied, described_by, forwarded
from adapter.http.render import Handler
from adapter.http.route_table import Owner, op_of
from adapter.http.streams import (
    appended_headers,
    appended_response,
    created_response,
    fork_from,
    stream_ref,
    tail_headers,
)
from adapter.log.errors import OutcomeUnknown
from adapter.log.outcomes import Forwarded
from adapter.protocol.commands import StreamRef
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.headers import parse_producer
from adapter.protocol.identifiers import validate_bucket_id
from adapter.protocol.offsets import parse_offset
from adapter.protocol.producers import ProducerPosition
from adapter.protocol.snapshots import EARLIEST_HEADER
from adapter.service.unanswered_writes import Sent, UnansweredWrites

log = logging.getLogger(__name__)

READS = frozenset({"GET", "HEAD"})
# A write whose slot moves while forwarded goes to the slot's next owners this many times more.
REROUTES = 2
REROUTE_WAIT_S = 5.0  # how long a moved slot's new owner may take to accept writes
MOVE_POLL_S = 0.1
COORDINATOR = web.AppKey("coordinator", Coordinator)
UNANSWERED = web.AppKey("unanswered_writes", UnansweredWrites)


@web.middleware
def forwarding_middleware(request: web.Request, handler: Handler) -> Awaitable[web.StreamResponse]:
    """Asks the coordinator once before a read and once before a write, and carries out its
    answer: serve here, forward to the slot's owner, or refuse while the slot moves. Not a
    coroutine: a read no sibling worker synchronises, and a request that writes nothing, get
    the handler's awaitable back, so no frame of it stays beside a long-lived request (a
    parked SSE session or long-poll)."""
    coordinator = request.app[COORDINATOR]
    if request.method in READS:
        ref = _stream_route_ref(request) if coordinator.siblings else None
        return handler(request) if ref is None else _read(request, handler, coordinator, ref)
    write = write_of(request)
    return handler(request) if write is None else _write(request, handler, coordinator, write)


async def _write(
    request: web.Request, handler: Handler, coordinator: Coordinator, write: Write
) -> web.StreamResponse:
    route = await coordinator.before_write(write)
    if route is None:
        return await handler(request)
    if isinstance(route, Local):
        return await _here(request, handler, route)
    if not isinstance(route, Forward) or FORWARDED in request.headers:
        raise _moving(route.slot)
    return await _forwarded(request, handler, write, route)


async def _here(request: web.Request, handler: Handler, route: Local) -> web.StreamResponse:
    """A write carried out here; one forwarded here, only by the owner generation it was
    routed to (`ROUTED_UNDER`), and answered with what it changed (`EFFECT`)."""
    mark = owner_mark_of(request)
    token = None if mark is None else ROUTED_UNDER.set((route.slot, mark))
    try:
        response = await handler(request)
    finally:
        if token is not None:
            ROUTED_UNDER.reset(token)
    forwarded = FORWARDED in request.headers
    if forwarded and isinstance(response, web.Response) and response.status < 300:
        change = _change_of(request, response)
        if change is not None:
            response.headers[EFFECT] = effects.encode(change)  # for the forwarder to wait on
    return response


async def _forwarded(
    request: web.Request, handler: Handler, write: Write, route: Forward
) -> web.StreamResponse:
    """The owner's answer; if the slot moves first and the former owner did not write the
    request, the next owner's (or this instance's, when the slot is now its own)."""
    for _ in range(REROUTES + 1):
        response = await _forward(request, route)
        if response is not None:
            effect = response.headers.popall(EFFECT, [])  # the owner's word to us, not the client's
            if response.status < 300:
                await _read_your_writes(request, response, effect[0] if effect else None)
            return response
        next_route = await _rerouted(request.app[COORDINATOR], write, route.slot)
        if next_route is None or isinstance(next_route, Local):
            return await handler(request)
        if not isinstance(next_route, Forward):
            break
        route = next_route
    raise _moving(route.slot)


def _moving(slot: int) -> ProtocolError:
    return ProtocolError(
        ErrorCode.UNAVAILABLE, f"write slot {slot} is changing owner; retry shortly"
    )


async def _rerouted(coordinator: Coordinator, write: Write, slot: int) -> Route | None:
    """The route of a write whose slot just moved: the new owner may still be initialising
    (between its owner record and its first accepted write), so it is asked again a while."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + REROUTE_WAIT_S
    while True:
        route = await coordinator.before_write(write)
        if not isinstance(route, Moving) or loop.time() >= deadline:
            return route
        await asyncio.sleep(MOVE_POLL_S)


async def _read(
    request: web.Request, handler: Handler, coordinator: Coordinator, ref: StreamRef
) -> web.StreamResponse:
    """A read, synchronised with the sibling worker that owns its stream, if one does; a
    sibling's own synchronising read is answered with this worker's last access."""
    if FORWARDED not in request.headers:
        ask = partial(described_by, request)
        await coordinator.before_read(ref, request.method == "GET", ask)
        return await handler(request)
    response = await handler(request)
    if not response.prepared and (at_ms := coordinator.last_access_ms(ref)) is not None:
        response.headers[LAST_ACCESS] = str(at_ms)
    return response


def _stream_route_ref(request: web.Request) -> StreamRef | None:
    """The stream a read on a stream's own route names; None on any other route, or for a
    name the handler will refuse as it would anyway."""
    if _owner(request) is not Owner.STREAM_READ:
        return None
    try:
        return stream_ref(request)
    except ProtocolError:
        return None


def _owner(request: web.Request) -> Owner:
    """How the request's route involves its write slot's owner (`routes.py` says, per route)."""
    op = op_of(request)
    return Owner.NONE if op is None else op.owner


def write_of(request: web.Request) -> Write | None:
    """What a write request changes, for the coordinator; None for requests whose route
    forwards nothing (deleting a snapshot is always refused; routes outside streams and
    buckets)."""
    owner = _owner(request)
    if not owner.forwarded:
        return None
    forwarded = FORWARDED in request.headers
    if owner is Owner.BUCKET:
        return Write(validate_bucket_id(request.match_info["bucket"]), forwarded=forwarded)
    ref = stream_ref(request)
    creates = owner is Owner.STREAM_WRITE and request.method == "PUT"
    fork = fork_from(request, ref) if request.method == "PUT" else None
    return Write(
        ref.bucket_id,
        ref.stream_id,
        fork_source=None if fork is None else fork.source_of(ref),
        creates=creates,
        snapshot=owner is Owner.SNAPSHOT,
        forwarded=forwarded,
    )


async def _forward(request: web.Request, route: Forward) -> web.Response | None:
    """The owner's answer to the request; None when it was not written there and the owners'
    record shows the slot has moved since it was sent (the caller routes it again).

    A request that never got a connection was never seen by the owner: refused at once as not
    written (503) when the slot has not moved. Once the slot moves (a newer owner record: the
    former owner is fenced) while the owner has not answered, a request never sent goes to
    the new owner, and one that was sent is learned from the log, then answered as written or
    sent to the new owner; only one whose outcome cannot be learned (untagged, or a body passed
    on as it arrives) keeps waiting for the former owner's answer."""
    coordinator = request.app[COORDINATOR]
    mark = coordinator.catalog.owner_mark(route.slot)
    headers = forwarded(request, route.url)
    headers[OWNER_MARK] = str(mark)  # carried out by that generation of the owner only
    sent = _tagged(request, route, headers)
    streamed = request.app[ROUTE_BODIES].streamed(request)
    hop = Hop()
    sending = asyncio.ensure_future(_send(request, route, headers, hop))
    watching = asyncio.ensure_future(_unanswered(request, route, hop))
    sending.add_done_callback(lambda _sent: watching.cancel())
    if not streamed:
        within_s = request.app[PEERS].timeout.total or 0.0
        moved = asyncio.ensure_future(coordinator.moved(route.slot, mark, within_s))
        try:
            await asyncio.wait((sending, moved), return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            sending.cancel()
            raise
        finally:
            moved.cancel()
        if not sending.done() and _moved(moved):
            if not hop.connected:
                sending.cancel()  # never sent: the slot's new owner takes it
                log.info("slot %d moved before a write reached %s", route.slot, route.url)
                return None
            if sent is not None:
                sending.cancel()  # the former owner is fenced: what it did is in the log
                log.info("slot %d moved while %s had a write of it", route.slot, route.url)
                return await _learned(request, sent)
    try:
        return await sending
    except (aiohttp.ClientError, TimeoutError) as error:
        log.warning("forwarding to %s (slot %d) failed: %s", route.url, route.slot, error)
        request.app[PEERS].on_failure(route.url)  # the owner may be gone: see to it
        if not hop.connected:  # the request never left: nothing can have been written
            if coordinator.catalog.owner_mark(route.slot) > mark:
                return None
            raise ProtocolError(
                ErrorCode.UNAVAILABLE,
                f"the owner of write slot {route.slot} could not be reached: nothing was "
                "written; retry",
            ) from error
        # Even a failure to connect may follow a request sent: aiohttp retries an idempotent
        # request (PUT, DELETE) on a new connection when a kept-alive one drops.
        if sent is None:
            raise ProtocolError(
                ErrorCode.UNAVAILABLE, f"the owner of write slot {route.slot} did not answer; retry"
            ) from error
        return await _learned(request, sent)


async def _unanswered(request: web.Request, route: Forward, hop: Hop) -> None:
    """Until the owner answers (this is cancelled then): every `SILENT_AFTER_S`, have it checked
    for a pause (adapter/cluster/dead_owners.py) once it has taken the request. Again and again,
    not once: an owner may answer its probes at first (slow, not paused) and be paused later
    while it holds this request. An owner that did not even accept the connection is left to
    the forward's failure."""
    peers = request.app[PEERS]
    while True:
        await asyncio.sleep(SILENT_AFTER_S)
        if hop.connected:
            peers.on_unanswered(route.url)


def _moved(watch: asyncio.Future[bool]) -> bool:
    """Whether the watch on the slot's owner record saw a newer owner."""
    return watch.done() and not watch.cancelled() and watch.result()


async def _send(
    request: web.Request, route: Forward, headers: CIMultiDict[str], hop: Hop
) -> web.Response:
    """The request sent to the owner at `route`, and its answer as it came."""
    if (request_id := request.get(REQUEST_ID)) is not None:
        headers[REQUEST_ID_HEADER] = request_id  # one id in both instances' logs
    tracing = request.app[STREAMS].tracing
    if tracing is not None:
        tracing.inject(headers)  # the owner's request span is a child of this one's
    url = route.url + request.rel_url.raw_path_qs
    # A streamed body (a snapshot, up to max_snapshot_bytes) is passed on as it arrives, never
    # held whole; other bodies are read first (bounded by their route's limit).
    body = request.content if request.app[ROUTE_BODIES].streamed(request) else await request.read()
    # aiohttp gives a body without a Content-Type one (application/octet-stream): the owner
    # must judge the request as it came (a missing Content-Type is 400, a wrong one 409).
    # The owner codes its answer as the client asked, or not at all: never as aiohttp would.
    skip = tuple(h for h in (hdrs.CONTENT_TYPE, hdrs.ACCEPT_ENCODING) if h not in headers)
    session = request.app[PEERS].session(route.url)
    async with session.request(
        request.method,
        url,
        headers=headers,
        data=body,
        allow_redirects=False,
        skip_auto_headers=skip,
        trace_request_ctx=hop,
    ) as reply:
        payload = await reply.read()
        answer = copied(reply.headers)
    if (location := answer.get(hdrs.LOCATION)) is not None and location.startswith(route.url):
        # The owner names what it made at its own address: the client asked at ours.
        answer[hdrs.LOCATION] = str(request.url.origin()) + location[len(route.url) :]
    return web.Response(status=reply.status, headers=answer, body=payload)


def _tagged(request: web.Request, route: Forward, headers: CIMultiDict[str]) -> Sent | None:
    """For a stream's append, creation or deletion: what to look for if the owner goes silent
    (its id goes in `headers`). Snapshot publishes, fences, trims (no record to learn their
    outcome by: a silent owner's answer is 503/504) and bucket writes are not tagged."""
    if _owner(request) is not Owner.STREAM_WRITE:
        return None
    sent = request.app[UNANSWERED].sent(stream_ref(request), route.slot)
    headers[FORWARD_ID] = sent.forward_id
    return sent


async def _learned(request: web.Request, sent: Sent) -> web.Response | None:
    """The answer to a write whose owner went silent: what the log says became of it; None
    when it was not written (the slot has a newer owner by then)."""
    found = await request.app[UNANSWERED].learn(sent)
    if found is None:
        raise OutcomeUnknown(
            f"the owner of write slot {sent.slot} went silent and no instance took the slot "
            "over in time: this write may or may not have happened"
        )
    if not found.written:  # its former owner is fenced: the slot's new owner takes it
        log.info("forwarded write %s was not written by its former owner", sent.forward_id)
        return None
    log.warning("forwarded write %s was written before its owner went silent", sent.forward_id)
    if request.method == "DELETE":
        return web.Response(status=204)
    if request.method == "PUT":
        return await _created(request, sent)
    return await _appended(request, sent, found)


async def _appended(request: web.Request, sent: Sent, found: Forwarded) -> web.Response:
    """The owner's answer to the append, built as the owner builds it: the stream as the
    append left it (this instance's catalog once it shows the append, the follower brings it,
    at the tail and closure the log says), the producer where the append put it (its own
    epoch and seq: it was written), 200 for a producer's new data. Without its ETag if the
    catalog never shows the stream in time."""
    service = request.app[STREAMS]
    await service.applied(sent.ref, found.tail, SHOWN_WAIT_S)
    meta = service.catalog.stream(sent.ref.bucket_id, sent.ref.stream_id)
    stamp = parse_producer(
        request.headers.get("Producer-Id"),
        request.headers.get("Producer-Epoch"),
        request.headers.get("Producer-Seq"),
    )
    producer = None if stamp is None else ProducerPosition(stamp.epoch, stamp.seq)
    if meta is None:
        headers = tail_headers(found.tail, found.closed)
    else:
        headers = appended_headers(replace(meta, next_offset=found.tail, closed=found.closed))
    return appended_response(headers, producer, found.last_data is not None)


async def _created(request: web.Request, sent: Sent) -> web.Response:
    """A creation the silent owner wrote: answered from this instance's catalog once it shows
    the stream (the follower brings it; the learning caught up already when it was new)."""
    service = request.app[STREAMS]
    await service.applied(sent.ref, 0, SHOWN_WAIT_S)
    meta = service.catalog.stream(sent.ref.bucket_id, sent.ref.stream_id)
    if meta is None:  # created, then deleted by another request meanwhile
        raise ProtocolError(ErrorCode.STREAM_NOT_FOUND, f"stream {sent.ref.stream_id!r} is gone")
    return created_response(request, meta, created=True)


async def _read_your_writes(
    request: web.Request, response: web.Response, effect: str | None
) -> None:
    """Hold the answer until this instance's catalog reflects the forwarded write: what the
    owner's `effect` says it changed (an owner of the release before this one says nothing:
    what its answer shows)."""
    if effect is None:
        change = _change_of(request, response)
    else:
        stream = _owner(request).on_stream
        bucket_id = request.match_info.get("bucket")
        change = effects.decode(effect, stream_ref(request) if stream else None, bucket_id)
    if change is None:
        return
    await request.app[COORDINATOR].after_forward(change)
    if isinstance(change, BucketChanged):
        await _mount_serving(request, response)


def _change_of(request: web.Request, response: web.Response) -> Change | None:
    """What a write's success answer shows it changed (the owner's `EFFECT`); None when there
    is nothing to wait for."""
    owner = _owner(request)
    if owner is Owner.BUCKET:
        etag = response.headers.get("ETag") if response.status < 300 else None
        return BucketChanged(request.match_info["bucket"], request.method == "PUT", etag)
    ref = stream_ref(request)
    if owner is Owner.SNAPSHOT:  # a publish moves no tail: wait for its pointer
        offset = parse_offset(request.match_info["offset"])
        return SnapshotPublished(ref, offset) if isinstance(offset, int) else None
    if (earliest := response.headers.get(EARLIEST_HEADER)) is not None:  # a trim's answer
        offset = parse_offset(earliest)
        return Trimmed(ref, offset) if isinstance(offset, int) else None
    if request.method == "DELETE":
        return TailMoved(ref, None)
    if (token := response.headers.get("Stream-Next-Offset")) is not None:
        offset = parse_offset(token)
        return TailMoved(ref, offset if isinstance(offset, int) else None)
    return None


async def _mount_serving(request: web.Request, response: web.Response) -> None:
    """A mount made elsewhere is answered 201 once this instance's own index of it serves
    reads too (each instance indexes the topic itself): else the owner's 201 becomes 202,
    as it would have been answered here."""
    bucket_id, mounted = request.match_info["bucket"], request.app[MOUNTED]
    made = request.method == "PUT" and response.status == 201
    if (
        made
        and mounted.covers(bucket_id)
        and not await mounted.until_serving(bucket_id, MOUNT_READY_S)
    ):
        response.set_status(202)
        response.headers["Retry-After"] = "1"
