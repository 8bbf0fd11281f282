"""The one error vocabulary: every code the adapter answers with, and which are retriable.

HTTP knows nothing here: each code's status is in one table at the edge
(`adapter/http/statuses.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Final


class ErrorCode(Enum):
    """A stable machine-readable code (its value, sent as the error body's `code`)."""

    BAD_REQUEST = "bad_request"
    INVALID_BUCKET_ID = "invalid_bucket_id"
    INVALID_STREAM_ID = "invalid_stream_id"
    INVALID_OFFSET = "invalid_offset"
    INVALID_HEADER = "invalid_header"
    INVALID_QUERY = "invalid_query"
    INVALID_TIME = "invalid_time"
    INVALID_JSON = "invalid_json"
    INVALID_MOUNT = "invalid_mount"
    INVALID_TRIM = "invalid_trim"
    TRIM_BEYOND_TAIL = "trim_beyond_tail"
    INVALID_RETENTION = "invalid_retention"
    EMPTY_BODY = "empty_body"
    EMPTY_JSON_ARRAY = "empty_json_array"
    INVALID_PRODUCER_EPOCH = "invalid_producer_epoch"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    TOPIC_NOT_ALLOWED = "topic_not_allowed"
    INSUFFICIENT_SCOPE = "insufficient_scope"
    ORIGIN_NOT_ALLOWED = "origin_not_allowed"
    STALE_PRODUCER_EPOCH = "stale_producer_epoch"
    NOT_FOUND = "not_found"
    BUCKET_NOT_FOUND = "bucket_not_found"
    STREAM_NOT_FOUND = "stream_not_found"
    SNAPSHOT_NOT_FOUND = "snapshot_not_found"
    TOPIC_NOT_FOUND = "topic_not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    MOUNT_READ_ONLY = "mount_read_only"
    BUCKET_EXISTS = "bucket_exists"
    BUCKET_NOT_EMPTY = "bucket_not_empty"
    STREAM_EXISTS = "stream_exists"
    # A record only the newest format level holds, before `upgrade finalize` switched it on.
    FORMAT_NOT_FINALIZED = "format_not_finalized"
    SOURCE_DELETED = "source_deleted"
    TOPIC_CONFLICT = "topic_conflict"
    TOPIC_MISSING = "topic_missing"  # managed externally: the platform must create it
    STREAM_CLOSED = "stream_closed"
    CONTENT_TYPE_MISMATCH = "content_type_mismatch"
    SEQUENCE_CONFLICT = "sequence_conflict"
    PRODUCER_SEQUENCE_GAP = "producer_sequence_gap"
    OFFSET_BEYOND_TAIL = "offset_beyond_tail"
    SNAPSHOT_IN_USE = "snapshot_in_use"
    MOUNT_CONFIGURED = "mount_configured"
    MOUNT_NOT_CONFIGURABLE = "mount_not_configurable"
    GONE = "gone"
    OFFSET_GONE = "offset_gone"
    PRECONDITION_FAILED = "precondition_failed"
    FENCING_TOKEN_MISMATCH = "fencing_token_mismatch"
    REQUEST_TIMEOUT = "request_timeout"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    URI_TOO_LONG = "uri_too_long"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    HOST_NOT_ALLOWED = "host_not_allowed"
    RATE_LIMITED = "rate_limited"
    TOO_MANY_READERS = "too_many_readers"
    EXPECTATION_FAILED = "expectation_failed"
    HEADERS_TOO_LARGE = "headers_too_large"
    NOT_READY = "not_ready"
    WORKER_UNRESPONSIVE = "worker_unresponsive"  # a pod's probe: a sibling is wedged
    UNAVAILABLE = "unavailable"  # nothing was written, ever
    TOO_MANY_CONNECTIONS = "too_many_connections"
    OUTCOME_UNKNOWN = "outcome_unknown"  # a write that may or may not have happened
    INTERNAL = "internal_error"

    @property
    def code(self) -> str:
        return self.value

    @property
    def retriable(self) -> bool:
        """Nothing was done and trying again may succeed (the edge adds `Retry-After`)."""
        return self in RETRIABLE


# Refusals that say nothing was done, for now: the service, or one of its parts, cannot
# answer yet. `outcome_unknown` is not one: the write may have happened.
RETRIABLE: Final = frozenset(
    {
        ErrorCode.NOT_READY,
        ErrorCode.WORKER_UNRESPONSIVE,
        ErrorCode.UNAVAILABLE,
        ErrorCode.TOO_MANY_CONNECTIONS,
    }
)


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
        return self.code.retriable
