"""`GET /openapi.json`: the API described as OpenAPI 3.1, built from the tables below.

Every served route is here (`tests/unit/test_openapi.py` walks the router and fails on one
that is not), with its parameters, the protocol's headers, its statuses and the error body.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from adapter.http.render import json_response
from adapter.protocol.errors import ErrorCode

PATH = "/openapi.json"  # a '.' is never in a bucket id, so this can never name a bucket
Json = dict[str, Any]

_ERROR = {"$ref": "#/components/schemas/Error"}
_TEXT = {"type": "string"}
_STREAM_HEADERS = {
    "Stream-Next-Offset": "the offset after the last message",
    "Stream-Up-To-Date": "`true` when the answer reaches the tail",
    "Stream-Closed": "`true` once the stream is closed",
    "Stream-Cursor": "the live cursor to send back as `cursor`",
    "Stream-Earliest-Offset": (
        "the stream's earliest readable offset: with a 410 below it, and in a trim's answer"
    ),
    "ETag": "the answer's entity tag (weak, `W/`, when the body is coded)",
    "Content-Encoding": "`gzip` or `zstd`: a GET's 200 body coded as `Accept-Encoding` allowed",
    "Vary": "`Accept-Encoding` on a GET's 200 that could be coded, beside `Origin` and others",
    "X-Request-Id": "the request's id (the client's, when sane, else a new one)",
}
_REQUEST_HEADERS = {
    "Content-Type": "the stream's media type",
    "Content-Encoding": (
        "`gzip` (or `x-gzip`) or `zstd`: the body is stored decoded, at most the body limit once"
        " decoded (else 413); `identity` is no coding; any other coding, or two, is 415"
    ),
    "Accept-Encoding": (
        "`gzip` and `zstd` (by `q`; zstd on a tie): a read's 200 body of 256 bytes or more is"
        " coded; `/bootstrap` gzip only; SSE never"
    ),
    "Stream-TTL": "seconds of inactivity before the stream expires",
    "Stream-Expires-At": "RFC 3339 time at which the stream expires",
    "Stream-Closed": "`true`: close the stream (with or after this body)",
    "Stream-Seq": "a writer's sequence; must grow",
    "If-Match": (
        "the stream's ETag, or `*` (a PUT: the stream must exist with it; 412 if not); on"
        " `PUT /{bucket}/config`, the bucket's ETag (412 if another change came first)"
    ),
    "If-None-Match": (
        "a read's or the stream's ETag (304 if unchanged); on a PUT, `*`: create only if absent"
        " (412 if not)"
    ),
    "Stream-Fencing-Token": (
        "the stream's fencing token, 1 to 64 visible ASCII characters (412 if it is not);"
        " on a fence, the token to set"
    ),
    "Producer-Id": "idempotent producer id (with Producer-Epoch and Producer-Seq)",
    "Producer-Epoch": "idempotent producer epoch",
    "Producer-Seq": "idempotent producer sequence",
    "Stream-Forked-From": (
        "the stream a new stream forks, of any bucket (`/{bucket}/{stream}` or "
        "`/v1/stream/{path}`; another bucket's needs `read` on it)"
    ),
    "Stream-Fork-Offset": "where the fork starts",
    "Stream-Fork-Sub-Offset": "messages into that offset's batch",
    "X-Request-Id": "an id for this request, echoed back",
    "traceparent": "W3C trace context, logged and forwarded",
}
_QUERY = {
    "offset": "`-1` (beginning), `now`, or an offset token",
    "live": "`long-poll` or `sse`",
    "cursor": "the last `Stream-Cursor`",
    "timeout": "seconds a long-poll waits at most",
    "at": (
        "read by time: from the first message appended at or after this moment, as milliseconds"
        " since 1970 or an RFC 3339 date-time (not with `offset`; 400 `invalid_time` if"
        " malformed); on a HEAD, `Stream-Next-Offset` answers that message's offset"
    ),
    "max_bytes": (
        "a catch-up or long-poll answer holds at most this many bytes of messages (1 to 2^53-1),"
        " never a cut message: one larger still comes, alone"
    ),
    "max_messages": "a catch-up or long-poll answer holds at most this many messages (1 to 2^53-1)",
    "prefix": "stream id prefix",
    "after": "list after this stream id",
    "limit": "most streams listed (1..1000); on the console's records, most records (1..1000)",
    "last": "the console's seek: N messages before the tail",
    "time": "the console's seek: the first offset written at or after this many ms since 1970",
}
_PATH_PARAMS: dict[str, tuple[str, Json]] = {
    "bucket": ("bucket id: 4 to 64 of a-z, 0-9, '_' and '-'", {"pattern": "^[a-z0-9_-]{4,64}$"}),
    "stream": ("stream id: 1 to 122 UTF-8 bytes, no '/'", {"pattern": "^[^/]{1,122}$"}),
    "path": (
        "a stream id, or `{bucket}/{stream id}` (see the base protocol)",
        {"minLength": 1, "maxLength": 187},  # a 64-byte bucket, "/", a 122-byte stream id
    ),
    "offset": ("an offset token", {"pattern": "^(-1|now|[0-9]{16}_[0-9]{16})$"}),
    "b": ("bucket id (the console's API)", {"pattern": "^[a-z0-9_-]{4,64}$"}),
    "s": ("stream id (the console's API)", {"pattern": "^[^/]{1,122}$"}),
    "name": ("a file of the web console", {"pattern": "^[a-z0-9_./-]{0,64}$"}),
}


def _op(
    summary: str,
    ok: dict[int, str],
    errors: tuple[int, ...],
    *,
    query: tuple[str, ...] = (),
    headers: tuple[str, ...] = (),
    body: bool = False,
    public: bool = False,
) -> Json:
    responses: Json = {
        str(status): {"description": text, "headers": _response_headers()}
        for status, text in ok.items()
    }
    for status in sorted({*errors, 503}):
        responses[str(status)] = {
            "description": ", ".join(sorted(_codes(status))),
            "content": {"application/json": {"schema": _ERROR}},
            "headers": _response_headers(),
        }
    operation: Json = {"summary": summary, "responses": responses}
    parameters = [_param(name, "query", _QUERY[name]) for name in query]
    parameters += [_param(name, "header", _REQUEST_HEADERS[name]) for name in headers]
    if parameters:
        operation["parameters"] = parameters
    if body:
        operation["requestBody"] = {
            "required": False,
            "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
        }
    if public:
        operation["security"] = []
    return operation


def _codes(status: int) -> set[str]:
    return {code.code for code in ErrorCode if code.status == status}


def _response_headers() -> Json:
    return {name: {"description": text, "schema": _TEXT} for name, text in _STREAM_HEADERS.items()}


def _param(
    name: str, where: str, text: str, required: bool = False, schema: Json | None = None
) -> Json:
    return {
        "name": name,
        "in": where,
        "required": required,
        "description": text,
        "schema": _TEXT | (schema or {}),
    }


_WRITE_HEADERS = (
    "Content-Type",
    "Content-Encoding",
    "Stream-Seq",
    "If-Match",
    "Stream-Closed",
    "Stream-Fencing-Token",
)
_PRODUCER = ("Producer-Id", "Producer-Epoch", "Producer-Seq")
_CREATE_HEADERS = (
    "Content-Type",
    "Content-Encoding",
    "Stream-TTL",
    "Stream-Expires-At",
    "Stream-Closed",
    "Stream-Forked-From",
    "Stream-Fork-Offset",
    "Stream-Fork-Sub-Offset",
    "If-Match",
    "If-None-Match",
)
_ROUTING = (400, 404, 405, 408, 413, 414, 415, 417, 431)


def _stream_operations() -> Json:
    return {
        "put": _op(
            "create a stream (idempotent with the same configuration)",
            {200: "exists with this configuration", 201: "created"},
            (*_ROUTING, 409, 410, 412, 504),
            headers=_CREATE_HEADERS,
            body=True,
        ),
        "post": _op(
            "append (or close)",
            {200: "appended, with producer headers", 204: "appended"},
            (*_ROUTING, 403, 409, 410, 412, 504),
            headers=(*_WRITE_HEADERS, *_PRODUCER),
            body=True,
        ),
        "get": _op(
            "read: catch-up, long-poll or SSE",
            {200: "messages", 204: "a long-poll that saw nothing new", 304: "not modified"},
            (*_ROUTING, 409, 410),
            query=("offset", "at", "live", "cursor", "timeout", "max_bytes", "max_messages"),
            headers=("If-None-Match", "Accept-Encoding"),
        ),
        "head": _op(
            "the stream's metadata",
            {200: "exists", 304: "unchanged since the ETag sent in If-None-Match"},
            (*_ROUTING, 410),
            query=("at",),
            headers=("If-None-Match",),
        ),
        "delete": _op("delete the stream", {204: "deleted"}, (*_ROUTING, 410, 504)),
    }


def _trim_operation() -> Json:
    """`POST {stream}/trim`: its JSON body named, unlike the byte bodies of other writes."""
    operation = _op(
        "remove the stream's messages below an offset (admin scope)",
        {204: "trimmed, or already trimmed at or past it: Stream-Earliest-Offset says where"},
        (*_ROUTING, 403, 410, 504),
    )
    before = {
        "type": "string",
        "description": "an offset token, `now` (the tail) or `-1` (nothing); past the tail: 400",
    }
    at = {
        "type": ["integer", "string"],
        "description": "ms since the epoch or an RFC 3339 time: below the first message "
        "appended at or after it",
    }
    schema = {
        "oneOf": [
            {
                "type": "object",
                "properties": {"before": before},
                "required": ["before"],
                "additionalProperties": False,
            },
            {
                "type": "object",
                "properties": {"at": at},
                "required": ["at"],
                "additionalProperties": False,
            },
        ]
    }
    operation["requestBody"] = {
        "required": True,
        "content": {"application/json": {"schema": schema}},
    }
    return operation


_RETENTION = {
    "type": ["object", "null"],
    "properties": {
        "max_age_ms": {
            "type": ["integer", "null"],
            "minimum": 1000,
            "maximum": 2**53 - 1,
            "description": "age retention: messages older than this many ms are trimmed from"
            " the bucket's streams (410 below, with Stream-Earliest-Offset); null: none",
        }
    },
    "additionalProperties": False,
}
_CONFIG = {
    "type": "object",
    "properties": {"retention": _RETENTION},
    "additionalProperties": False,
}
_MOUNT = {
    "type": "object",
    "properties": {"mount": {"type": "object"}},
    "required": ["mount"],
    "additionalProperties": False,
}
_CREATE_BODY = {"oneOf": [_CONFIG, _MOUNT]}


def _with_config_body(operation: Json, schema: Json, required: bool = False) -> Json:
    operation["requestBody"] = {
        "required": required,
        "content": {"application/json": {"schema": schema}},
    }
    return operation


def _config_operation() -> Json:
    """`PUT /{bucket}/config`: the whole configuration, conditional with `If-Match`."""
    operation = _op(
        "replace a bucket's configuration (age retention); answers it with the new ETag",
        {200: "the configuration now"},
        (*_ROUTING, 409, 412, 504),
        headers=("If-Match",),
    )
    return _with_config_body(operation, _CONFIG, required=True)


_BUCKET_MADE = {
    201: "created (a mount: once it serves reads)",
    202: "mounted, its index still catching up with the topic (`Retry-After`): reads answer 503"
    " `not_ready` until it has",
}


def _paths() -> Json:
    health = {"get": _op("liveness", {200: "the process answers"}, (), public=True)}
    ready = {"get": _op("readiness, every check", {200: "ready"}, (), public=True)}
    bucket = {
        "put": _with_config_body(
            _op("create a bucket, or mount a topic", _BUCKET_MADE, (*_ROUTING, 409, 504)),
            _CREATE_BODY,
        ),
        "get": _op(
            "describe a bucket (with its configuration and ETag)", {200: "the bucket"}, _ROUTING
        ),
        "delete": _op("delete an empty bucket", {204: "deleted"}, (*_ROUTING, 409, 504)),
    }
    config = {"put": _config_operation()}
    listing = {
        "get": _op(
            "list a bucket's streams",
            {200: "a page of streams"},
            _ROUTING,
            query=("prefix", "after", "limit"),
        )
    }
    snapshot_latest = {
        "get": _op("redirect to the latest snapshot", {307: "see Location"}, _ROUTING)
    }
    snapshot = {
        "put": _op("publish a snapshot", {204: "published"}, (*_ROUTING, 409, 410), body=True),
        "get": _op("read a snapshot", {200: "the snapshot"}, (*_ROUTING, 410)),
        "delete": _op("delete a snapshot", {204: "deleted"}, (*_ROUTING, 409)),
    }
    bootstrap = {
        "get": _op(
            "the latest snapshot and every message after it",
            {200: "multipart"},
            _ROUTING,
            headers=("Accept-Encoding",),
        )
    }
    fence = {
        "post": _op(
            "set the fencing token later appends must carry",
            {204: "set (or already the stream's token)"},
            (*_ROUTING, 410, 504),
            headers=("Stream-Fencing-Token",),
        )
    }
    trim = {"post": _trim_operation()}
    spec = {
        "/healthz": health,
        "/readyz": ready,
        PATH: {"get": _op("this document", {200: "OpenAPI 3.1"}, (), public=True)},
        "/{bucket}": bucket,
        "/{bucket}/config": config,
        "/{bucket}/streams": listing,
        "/{bucket}/{stream}": _stream_operations(),
        "/v1/stream/{path}": _stream_operations(),
        "/{bucket}/{stream}/snapshot": snapshot_latest,
        "/{bucket}/{stream}/snapshot/{offset}": snapshot,
        "/{bucket}/{stream}/bootstrap": bootstrap,
        "/{bucket}/{stream}/fence": fence,
        "/{bucket}/{stream}/trim": trim,
        "/v1/stream/{path}/snapshot": snapshot_latest,
        "/v1/stream/{path}/snapshot/{offset}": snapshot,
        "/v1/stream/{path}/bootstrap": bootstrap,
        "/v1/stream/{path}/fence": fence,
        "/v1/stream/{path}/trim": trim,
        **_console_paths(),
    }
    spec["/{bucket}"] = _linked(bucket, "put", "createBucket", 201, "createStream")
    spec["/{bucket}/{stream}"] = _linked(
        _linked(
            _linked(spec["/{bucket}/{stream}"], "put", "createStream", 201, "appendToStream"),
            "post",
            "appendToStream",
            204,
            "readStream",
        ),
        "get",
        "readStream",
        None,
        None,
    )
    return {path: _with_path_params(path, item) for path, item in spec.items()}


# What a link passes on: the bucket and stream of the request that succeeded, and for a
# read, the stream's beginning (so it reads what the append wrote).
_LINK_PARAMETERS: dict[str, Json] = {
    "createStream": {"bucket": "$request.path.bucket"},
    "appendToStream": {"bucket": "$request.path.bucket", "stream": "$request.path.stream"},
    "readStream": {
        "bucket": "$request.path.bucket",
        "stream": "$request.path.stream",
        "offset": "-1",
    },
}


def _linked(item: Json, method: str, operation_id: str, status: int | None, to: str | None) -> Json:
    """`item` with `method` named `operation_id` and, on `status`, a link to the operation
    `to`: the create → append → read workflow a stateful fuzzer follows."""
    operation = item[method] | {"operationId": operation_id}
    if status is not None and to is not None:
        responses = operation["responses"]
        link = {to: {"operationId": to, "parameters": _LINK_PARAMETERS[to]}}
        operation["responses"] = responses | {str(status): responses[str(status)] | {"links": link}}
    return item | {method: operation}


def _console_paths() -> Json:
    """The web console (`http/console.py`): its files and its read-only API."""
    console_api = (400, 404, 410)
    return {
        "/ui": {"get": _op("the web console (redirect to its page)", {308: "see Location"}, ())},
        "/ui/{name}": {"get": _op("a file of the web console", {200: "the file"}, (404,))},
        "/ui/api/config": {"get": _op("the console's mode", {200: "off, ro or rw"}, ())},
        "/ui/api/buckets": {"get": _op("every bucket, with stream counts", {200: "list"}, ())},
        "/ui/api/stream/{b}/{s}": {
            "get": _op("a stream's Kafka facts and fork lineage", {200: "facts"}, console_api)
        },
        "/ui/api/seek/{b}/{s}": {
            "get": _op(
                "the offset N messages before the tail, or at a time",
                {200: "an offset token"},
                console_api,
                query=("last", "time"),
            )
        },
        "/ui/api/records/{b}/{s}": {
            "get": _op(
                "each message's Kafka coordinates from an offset on",
                {200: "records"},
                console_api,
                query=("offset", "limit"),
            )
        },
    }


def _with_path_params(path: str, item: Json) -> Json:
    """`item` with its path's parameters (a new dict: items may be shared by paths)."""
    names = [part[1:-1] for part in path.split("/") if part.startswith("{")]
    if not names:
        return item
    parameters = [
        _param(name, "path", _PATH_PARAMS[name][0], True, _PATH_PARAMS[name][1]) for name in names
    ]
    return item | {"parameters": parameters}


def document() -> Json:
    """The whole OpenAPI 3.1 document."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "durable-kafka",
            "version": "1",
            "description": "The Durable Streams HTTP protocol, with every byte kept in Kafka.",
        },
        "paths": _paths(),
        "components": {
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {
                        "error": {
                            "type": "object",
                            "required": ["code", "message"],
                            "properties": {
                                "code": {"enum": sorted({code.code for code in ErrorCode})},
                                "message": _TEXT,
                            },
                        }
                    },
                }
            },
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        # `{}`: anonymous requests are served too, as they are while authentication is off.
        "security": [{"bearer": []}, {}],
    }


async def openapi(_request: web.Request) -> web.Response:
    return json_response(document(), headers={"Cache-Control": "no-cache"})
