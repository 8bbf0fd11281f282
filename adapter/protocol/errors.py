"""The one error vocabulary: every code the adapter answers with, and its HTTP status."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum


class ErrorCode(Enum):
    """A stable machine-readable code, with the HTTP status it is rendered as."""

    BAD_REQUEST = ("bad_request", 400)
    INVALID_BUCKET_ID = ("invalid_bucket_id", 400)
    INVALID_STREAM_ID = ("invalid_stream_id", 400)
    INVALID_OFFSET = ("invalid_offset", 400)
    INVALID_HEADER = ("invalid_header", 400)
    INVALID_QUERY = ("invalid_query", 400)
    INVALID_TIME = ("invalid_time", 400)
    INVALID_JSON = ("invalid_json", 400)
    INVALID_MOUNT = ("invalid_mount", 400)
    INVALID_TRIM = ("invalid_trim", 400)
    TRIM_BEYOND_TAIL = ("trim_beyond_tail", 400)
    INVALID_RETENTION = ("invalid_retention", 400)
    EMPTY_BODY = ("empty_body", 400)
    EMPTY_JSON_ARRAY = ("empty_json_array", 400)
    INVALID_PRODUCER_EPOCH = ("invalid_producer_epoch", 400)
    UNAUTHORIZED = ("unauthorized", 401)
    FORBIDDEN = ("forbidden", 403)
    TOPIC_NOT_ALLOWED = ("topic_not_allowed", 403)
    INSUFFICIENT_SCOPE = ("insufficient_scope", 403)
    ORIGIN_NOT_ALLOWED = ("origin_not_allowed", 403)
    STALE_PRODUCER_EPOCH = ("stale_producer_epoch", 403)
    NOT_FOUND = ("not_found", 404)
    BUCKET_NOT_FOUND = ("bucket_not_found", 404)
    STREAM_NOT_FOUND = ("stream_not_found", 404)
    SNAPSHOT_NOT_FOUND = ("snapshot_not_found", 404)
    TOPIC_NOT_FOUND = ("topic_not_found", 404)
    METHOD_NOT_ALLOWED = ("method_not_allowed", 405)
    MOUNT_READ_ONLY = ("mount_read_only", 405)
    BUCKET_EXISTS = ("bucket_exists", 409)
    BUCKET_NOT_EMPTY = ("bucket_not_empty", 409)
    STREAM_EXISTS = ("stream_exists", 409)
    # A record only the newest format level holds, before `upgrade finalize` switched it on.
    FORMAT_NOT_FINALIZED = ("format_not_finalized", 409)
    SOURCE_DELETED = ("source_deleted", 409)
    TOPIC_CONFLICT = ("topic_conflict", 409)
    TOPIC_MISSING = ("topic_missing", 409)  # managed externally: the platform must create it
    STREAM_CLOSED = ("stream_closed", 409)
    CONTENT_TYPE_MISMATCH = ("content_type_mismatch", 409)
    SEQUENCE_CONFLICT = ("sequence_conflict", 409)
    PRODUCER_SEQUENCE_GAP = ("producer_sequence_gap", 409)
    OFFSET_BEYOND_TAIL = ("offset_beyond_tail", 409)
    SNAPSHOT_IN_USE = ("snapshot_in_use", 409)
    MOUNT_CONFIGURED = ("mount_configured", 409)
    MOUNT_NOT_CONFIGURABLE = ("mount_not_configurable", 409)
    GONE = ("gone", 410)
    OFFSET_GONE = ("offset_gone", 410)
    PRECONDITION_FAILED = ("precondition_failed", 412)
    FENCING_TOKEN_MISMATCH = ("fencing_token_mismatch", 412)
    REQUEST_TIMEOUT = ("request_timeout", 408)
    PAYLOAD_TOO_LARGE = ("payload_too_large", 413)
    URI_TOO_LONG = ("uri_too_long", 414)
    UNSUPPORTED_MEDIA_TYPE = ("unsupported_media_type", 415)
    HOST_NOT_ALLOWED = ("host_not_allowed", 421)
    RATE_LIMITED = ("rate_limited", 429)
    TOO_MANY_READERS = ("too_many_readers", 429)
    EXPECTATION_FAILED = ("expectation_failed", 417)
    HEADERS_TOO_LARGE = ("headers_too_large", 431)
    NOT_READY = ("not_ready", 503)
    WORKER_UNRESPONSIVE = ("worker_unresponsive", 503)  # a pod's probe: a sibling is wedged
    UNAVAILABLE = ("unavailable", 503)  # nothing was written, ever
    TOO_MANY_CONNECTIONS = ("too_many_connections", 503)
    OUTCOME_UNKNOWN = ("outcome_unknown", 504)  # a write that may or may not have happened
    INTERNAL = ("internal_error", 500)

    def __init__(self, code: str, status: int) -> None:
        self.code = code
        self.status = status


class ProtocolError(Exception):
    """A request the adapter refuses, with the code, a message for humans and extra headers."""

    def __init__(
        self, code: ErrorCode, message: str, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.headers = dict(headers or {})

    @property
    def retriable(self) -> bool:
        return self.code.status == 503
