"""The one error vocabulary: every code the adapter answers with, and its HTTP status."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum


class ErrorCode(Enum):
    """A stable machine-readable code, with the HTTP status it is rendered as."""

    BAD_REQUEST = ("bad_request", 400)
    NOT_FOUND = ("not_found", 404)
    METHOD_NOT_ALLOWED = ("method_not_allowed", 405)
    PAYLOAD_TOO_LARGE = ("payload_too_large", 413)
    NOT_READY = ("not_ready", 503)
    UNAVAILABLE = ("unavailable", 503)
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
