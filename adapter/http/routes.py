"""Every route the main listener serves, declared once: path, method, handler, what a caller
needs, how the write-slot owner is involved, the kind of body, and the description in
`/openapi.json`. The router, the auth needs, forwarding, the flat surface's reserved stream
paths, the body limits and the OpenAPI document are all built from `table` (see
`route_table.py`).

Routes match in the order of the table. The console's come before `/{bucket}/{stream}`,
which `/ui/x` fits. `/{bucket}/config` and `/{bucket}/streams` come before
`/{bucket}/{stream}`, which fits them. A flat stream's sub-resources (snapshot, bootstrap,
fence, trim) come before `/v1/stream/{path}` (which would take them as stream paths), and
the bucketed ones after it (`/{bucket}/{stream}/snapshot` would take `/v1/stream/snapshot`).
`/{bucket}` comes last: no other route fits a single segment, and every path of two or more
segments tried it first (aiohttp tries the routes of one leading segment in turn, and
appends, by far the most frequent request, would pay for each).
"""

from __future__ import annotations

from dataclasses import replace

from adapter.config import ConsoleMode
from adapter.http import (
    bootstrap,
    buckets,
    console,
    fences,
    health,
    openapi,
    snapshots,
    streams,
    trims,
)
from adapter.http.api_schemas import (
    CONFIG,
    CREATE_BODY,
    CREATE_HEADERS,
    PRODUCER,
    ROUTING,
    TRIM_BODY,
    WRITE_HEADERS,
)
from adapter.http.bodies import Body
from adapter.http.render import Handler
from adapter.http.route_needs import (
    admin_of_stream,
    append_or_admin,
    by_method,
    read_bucket,
    read_every_bucket,
    token_only,
)
from adapter.http.route_table import (
    BUCKETED_STREAM,
    FLAT_STREAM,
    Doc,
    Link,
    NeedOf,
    Op,
    Owner,
    Route,
    Table,
    below,
    unlinked,
)


def _op(
    method: str,
    handler: Handler,
    doc: Doc | None,
    *,
    need: NeedOf | None = by_method,
    owner: Owner = Owner.NONE,
    body: Body = Body.CONTROL,
    head: bool = False,
) -> Op:
    """An operation; by default it needs what its method does (`route_needs.by_method`),
    involves no slot owner, and takes a small control body."""
    return Op(method, handler, need, owner, body, doc, head)


def _public(path: str, handler: Handler, summary: str, ok: str) -> Route:
    return Route(path, (_op("GET", handler, Doc(summary, {200: ok}), need=None, head=True),))


# What a link passes on: the bucket and stream of the request that succeeded, and for a
# read, the stream's beginning (so it reads what the append wrote).
_TO_STREAM = {"bucket": "$request.path.bucket"}
_TO_APPEND = _TO_STREAM | {"stream": "$request.path.stream"}
_TO_READ = _TO_APPEND | {"offset": "-1"}

HEALTHZ = _public("/healthz", health.healthz, "liveness", "the process answers")
READYZ = _public("/readyz", health.readyz, "readiness, every check", "ready")
OPENAPI = _public(openapi.PATH, openapi.openapi, "this document", "OpenAPI 3.1")

BUCKET = Route(
    "/{bucket}",
    (
        _op(
            "PUT",
            buckets.create_bucket,
            Doc(
                "create a bucket, or mount a topic",
                {
                    201: "created (a mount: once it serves reads)",
                    202: "mounted, its index still catching up with the topic (`Retry-After`):"
                    " reads answer 503 `not_ready` until it has",
                },
                (*ROUTING, 409, 504),
                schema=CREATE_BODY,
                operation_id="createBucket",
                link=Link(201, "createStream", _TO_STREAM),
            ),
            owner=Owner.BUCKET,
        ),
        _op(
            "GET",
            buckets.get_bucket,
            Doc(
                "describe a bucket (with its configuration and ETag)", {200: "the bucket"}, ROUTING
            ),
            head=True,
        ),
        _op(
            "DELETE",
            buckets.delete_bucket,
            Doc("delete an empty bucket", {204: "deleted"}, (*ROUTING, 409, 504)),
            owner=Owner.BUCKET,
        ),
    ),
)
BUCKET_CONFIG = Route(
    "/{bucket}/config",
    (
        _op(
            "PUT",
            buckets.configure_bucket,
            Doc(
                "replace a bucket's configuration (age retention); answers it with the new ETag",
                {200: "the configuration now"},
                (*ROUTING, 409, 412, 504),
                headers=("If-Match",),
                schema=CONFIG,
                schema_required=True,
            ),
            owner=Owner.BUCKET,
        ),
    ),
)
BUCKET_STREAMS = Route(
    "/{bucket}/streams",
    (
        _op(
            "GET",
            buckets.list_streams,
            Doc(
                "list a bucket's streams",
                {200: "a page of streams"},
                ROUTING,
                query=("prefix", "after", "limit"),
            ),
            head=True,
        ),
    ),
)

# A stream, on either surface; its operations are linked on the bucketed one.
STREAM = Route(
    BUCKETED_STREAM,
    (
        _op(
            "PUT",
            streams.create_stream,
            Doc(
                "create a stream (idempotent with the same configuration)",
                {200: "exists with this configuration", 201: "created"},
                (*ROUTING, 409, 410, 412, 504),
                headers=CREATE_HEADERS,
                body=True,
                operation_id="createStream",
                link=Link(201, "appendToStream", _TO_APPEND),
            ),
            owner=Owner.STREAM_WRITE,
            body=Body.HELD,  # a stream's data, not a control
        ),
        _op(
            "POST",
            streams.append,
            Doc(
                "append (or close)",
                {200: "appended, with producer headers", 204: "appended"},
                (*ROUTING, 403, 409, 410, 412, 504),
                headers=(*WRITE_HEADERS, *PRODUCER),
                body=True,
                operation_id="appendToStream",
                link=Link(204, "readStream", _TO_READ),
            ),
            owner=Owner.STREAM_WRITE,
            body=Body.HELD,
        ),
        _op(
            "GET",
            streams.read,
            Doc(
                "read: catch-up, long-poll or SSE",
                {200: "messages", 204: "a long-poll that saw nothing new", 304: "not modified"},
                (*ROUTING, 409, 410),
                query=("offset", "at", "live", "cursor", "timeout", "max_bytes", "max_messages"),
                headers=("If-None-Match", "Accept-Encoding"),
                operation_id="readStream",
            ),
            owner=Owner.STREAM_READ,
        ),
        _op(
            "HEAD",
            streams.head,
            Doc(
                "the stream's metadata",
                {200: "exists", 304: "unchanged since the ETag sent in If-None-Match"},
                (*ROUTING, 410),
                query=("at",),
                headers=("If-None-Match",),
            ),
            owner=Owner.STREAM_READ,
        ),
        _op(
            "DELETE",
            streams.delete_stream,
            Doc("delete the stream", {204: "deleted"}, (*ROUTING, 410, 504)),
            owner=Owner.STREAM_WRITE,
        ),
    ),
)

SNAPSHOT_LATEST = Route(
    "snapshot",
    (
        _op(
            "GET",
            snapshots.latest,
            Doc("redirect to the latest snapshot", {307: "see Location"}, ROUTING),
        ),
    ),
    below_stream="snapshot",
)
SNAPSHOT = Route(
    "snapshot/{offset}",
    (
        _op(
            "PUT",
            snapshots.publish,
            Doc("publish a snapshot", {204: "published"}, (*ROUTING, 409, 410), body=True),
            owner=Owner.SNAPSHOT,
            # Streamed to the object store, bounded by `max_snapshot_bytes`.
            body=Body.STREAMED,
        ),
        _op("GET", snapshots.read, Doc("read a snapshot", {200: "the snapshot"}, (*ROUTING, 410))),
        # Deleting a snapshot is always refused: nothing to forward.
        _op(
            "DELETE", snapshots.delete, Doc("delete a snapshot", {204: "deleted"}, (*ROUTING, 409))
        ),
    ),
    below_stream="snapshot/{offset}",
)
BOOTSTRAP = Route(
    "bootstrap",
    (
        _op(
            "GET",
            bootstrap.bootstrap,
            Doc(
                "the latest snapshot and every message after it",
                {200: "multipart"},
                ROUTING,
                headers=("Accept-Encoding",),
            ),
        ),
    ),
    below_stream="bootstrap",
)
FENCE = Route(
    "fence",
    (
        _op(
            "POST",
            fences.fence,
            Doc(
                "set the fencing token later appends must carry",
                {204: "set (or already the stream's token)"},
                (*ROUTING, 410, 504),
                headers=("Stream-Fencing-Token",),
            ),
            need=append_or_admin,
            owner=Owner.STREAM_STATE,
        ),
    ),
    below_stream="fence",
)
_TRIMMED = "trimmed, or already trimmed at or past it: Stream-Earliest-Offset says where"
TRIM = Route(
    "trim",
    (
        _op(
            "POST",
            trims.trim,
            Doc(
                "remove the stream's messages below an offset (admin scope)",
                {204: _TRIMMED},
                (*ROUTING, 403, 410, 504),
                schema=TRIM_BODY,
                schema_required=True,
            ),
            need=admin_of_stream,
            owner=Owner.STREAM_STATE,
        ),
    ),
    below_stream="trim",
)
BELOW_STREAM = (SNAPSHOT_LATEST, SNAPSHOT, BOOTSTRAP, FENCE, TRIM)


def _console_get(path: str, handler: Handler, doc: Doc, need: NeedOf | None) -> Route:
    return Route(path, (_op("GET", handler, doc, need=need, head=True),))


def _console(mode: ConsoleMode) -> Table:
    """The web console (`http/console.py`): its files and the mode are public (they hold no
    data), its API reads. Off: every `/ui` path answers 404."""
    if mode == "off":
        return tuple(
            Route(path, (_op("*", console.off, None, need=None),))
            for path in ("/ui", "/ui/{rest:.*}")
        )
    api = (400, 404, 410)
    return (
        _console_get(
            "/ui",
            console.to_index,
            Doc("the web console (redirect to its page)", {308: "see Location"}),
            None,
        ),
        _console_get(
            "/ui/api/config",
            console.config,
            Doc("the console's mode", {200: "off, ro or rw"}),
            None,
        ),
        _console_get(
            "/ui/api/buckets",
            console.buckets,
            Doc("every bucket, with stream counts", {200: "list"}),
            read_every_bucket,
        ),
        _console_get(
            "/ui/api/stream/{b}/{s}",
            console.stream,
            Doc("a stream's Kafka facts and fork lineage", {200: "facts"}, api),
            read_bucket,
        ),
        _console_get(
            "/ui/api/seek/{b}/{s}",
            console.seek,
            Doc(
                "the offset N messages before the tail, or at a time",
                {200: "an offset token"},
                api,
                query=("last", "time"),
            ),
            read_bucket,
        ),
        _console_get(
            "/ui/api/records/{b}/{s}",
            console.records,
            Doc(
                "each message's Kafka coordinates from an offset on",
                {200: "records"},
                api,
                query=("offset", "limit"),
            ),
            read_bucket,
        ),
        # Any other API path: 404 once the caller's token is known (it says nothing of a bucket).
        Route("/ui/api/{rest:.*}", (_op("*", console.no_api, None, need=token_only),)),
        _console_get(
            "/ui/{name:.*}",
            console.static,
            Doc("a file of the web console", {200: "the file"}, (404,)),
            None,
        ),
    )


def table(console_mode: ConsoleMode = "rw") -> Table:
    """Every route, in the order they match."""
    return (
        HEALTHZ,
        READYZ,
        OPENAPI,
        *_console(console_mode),
        BUCKET_CONFIG,
        BUCKET_STREAMS,
        *(below(FLAT_STREAM, route) for route in BELOW_STREAM),
        unlinked(replace(STREAM, path=FLAT_STREAM)),
        STREAM,
        *(below(BUCKETED_STREAM, route) for route in BELOW_STREAM),
        BUCKET,
    )
