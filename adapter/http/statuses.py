"""Every error code's HTTP status, in one exhaustive table: the only place a refusal meets HTTP.

The stream rules (`adapter/protocol/`) decide refusals by code alone; the edge renders them
(`adapter/http/render.py`), documents them (`adapter/http/openapi.py`) and lists them
(`docs/reference/errors.md`) through `status_of`. A code added to `ErrorCode` without a row
here fails the unit tier (`tests/unit/test_statuses.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from adapter.protocol.errors import ErrorCode

STATUSES: Final[Mapping[ErrorCode, int]] = MappingProxyType(
    {
        ErrorCode.BAD_REQUEST: 400,
        ErrorCode.INVALID_BUCKET_ID: 400,
        ErrorCode.INVALID_STREAM_ID: 400,
        ErrorCode.INVALID_OFFSET: 400,
        ErrorCode.INVALID_HEADER: 400,
        ErrorCode.INVALID_QUERY: 400,
        ErrorCode.INVALID_TIME: 400,
        ErrorCode.INVALID_JSON: 400,
        ErrorCode.INVALID_MOUNT: 400,
        ErrorCode.INVALID_TRIM: 400,
        ErrorCode.TRIM_BEYOND_TAIL: 400,
        ErrorCode.INVALID_RETENTION: 400,
        ErrorCode.EMPTY_BODY: 400,
        ErrorCode.EMPTY_JSON_ARRAY: 400,
        ErrorCode.INVALID_PRODUCER_EPOCH: 400,
        ErrorCode.UNAUTHORIZED: 401,
        ErrorCode.FORBIDDEN: 403,
        ErrorCode.TOPIC_NOT_ALLOWED: 403,
        ErrorCode.INSUFFICIENT_SCOPE: 403,
        ErrorCode.ORIGIN_NOT_ALLOWED: 403,
        ErrorCode.STALE_PRODUCER_EPOCH: 403,
        ErrorCode.NOT_FOUND: 404,
        ErrorCode.BUCKET_NOT_FOUND: 404,
        ErrorCode.STREAM_NOT_FOUND: 404,
        ErrorCode.SNAPSHOT_NOT_FOUND: 404,
        ErrorCode.TOPIC_NOT_FOUND: 404,
        ErrorCode.METHOD_NOT_ALLOWED: 405,
        ErrorCode.MOUNT_READ_ONLY: 405,
        ErrorCode.BUCKET_EXISTS: 409,
        ErrorCode.BUCKET_NOT_EMPTY: 409,
        ErrorCode.STREAM_EXISTS: 409,
        ErrorCode.FORMAT_NOT_FINALIZED: 409,
        ErrorCode.SOURCE_DELETED: 409,
        ErrorCode.TOPIC_CONFLICT: 409,
        ErrorCode.TOPIC_MISSING: 409,
        ErrorCode.STREAM_CLOSED: 409,
        ErrorCode.CONTENT_TYPE_MISMATCH: 409,
        ErrorCode.SEQUENCE_CONFLICT: 409,
        ErrorCode.PRODUCER_SEQUENCE_GAP: 409,
        ErrorCode.OFFSET_BEYOND_TAIL: 409,
        ErrorCode.SNAPSHOT_IN_USE: 409,
        ErrorCode.MOUNT_CONFIGURED: 409,
        ErrorCode.MOUNT_NOT_CONFIGURABLE: 409,
        ErrorCode.GONE: 410,
        ErrorCode.OFFSET_GONE: 410,
        ErrorCode.PRECONDITION_FAILED: 412,
        ErrorCode.FENCING_TOKEN_MISMATCH: 412,
        ErrorCode.REQUEST_TIMEOUT: 408,
        ErrorCode.PAYLOAD_TOO_LARGE: 413,
        ErrorCode.URI_TOO_LONG: 414,
        ErrorCode.UNSUPPORTED_MEDIA_TYPE: 415,
        ErrorCode.HOST_NOT_ALLOWED: 421,
        ErrorCode.RATE_LIMITED: 429,
        ErrorCode.TOO_MANY_READERS: 429,
        ErrorCode.EXPECTATION_FAILED: 417,
        ErrorCode.HEADERS_TOO_LARGE: 431,
        ErrorCode.NOT_READY: 503,
        ErrorCode.WORKER_UNRESPONSIVE: 503,
        ErrorCode.UNAVAILABLE: 503,
        ErrorCode.TOO_MANY_CONNECTIONS: 503,
        ErrorCode.OUTCOME_UNKNOWN: 504,
        ErrorCode.INTERNAL: 500,
    }
)


def status_of(code: ErrorCode) -> int:
    """The HTTP status a refusal with `code` is answered with."""
    return STATUSES[code]
