"""The pieces `/openapi.json` shares between routes: the protocol's headers and query
parameters (each described once, named by the routes' `Doc`s), the path variables, the error
body and the JSON bodies of the control routes."""

from __future__ import annotations

from typing import Any

Json = dict[str, Any]

ERROR = {"$ref": "#/components/schemas/Error"}
TEXT = {"type": "string"}
RESPONSE_HEADERS = {
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
REQUEST_HEADERS = {
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
QUERY = {
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
    "prefix": "stream id prefix (at most 122 bytes of UTF-8, no NUL)",
    "after": "list after this stream id (at most 122 bytes of UTF-8, no NUL)",
    "limit": "most streams listed (1..1000); on the console's records, most records (1..1000)",
    "last": "the console's seek: N messages before the tail",
    "time": "the console's seek: the first offset written at or after this many ms since 1970",
}
PATH_PARAMS: dict[str, tuple[str, Json]] = {
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

WRITE_HEADERS = (
    "Content-Type",
    "Content-Encoding",
    "Stream-Seq",
    "If-Match",
    "Stream-Closed",
    "Stream-Fencing-Token",
)
PRODUCER = ("Producer-Id", "Producer-Epoch", "Producer-Seq")
CREATE_HEADERS = (
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
ROUTING = (400, 404, 405, 408, 413, 414, 415, 417, 431)

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
CONFIG = {
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
CREATE_BODY = {"oneOf": [CONFIG, _MOUNT]}

_BEFORE = {
    "type": "string",
    "description": "an offset token, `now` (the tail) or `-1` (nothing); past the tail: 400",
}
_AT = {
    "type": ["integer", "string"],
    "description": "ms since the epoch or an RFC 3339 time: below the first message "
    "appended at or after it",
}
# A trim's body names where it cuts: below an offset, or below a moment.
TRIM_BODY = {
    "oneOf": [
        {
            "type": "object",
            "properties": {"before": _BEFORE},
            "required": ["before"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {"at": _AT},
            "required": ["at"],
            "additionalProperties": False,
        },
    ]
}
