"""Errors render as `{"error": {"code", "message"}}` with their status and headers."""

from __future__ import annotations

import json

from adapter.http.render import error_response
from adapter.protocol.errors import ErrorCode, ProtocolError


def _body(text: bytes) -> object:
    return json.loads(text)


def test_error_body_and_status() -> None:
    response = error_response(ProtocolError(ErrorCode.NOT_FOUND, "no such stream"))
    assert response.status == 404
    assert response.content_type == "application/json"
    assert isinstance(response.body, bytes)
    assert _body(response.body) == {"error": {"code": "not_found", "message": "no such stream"}}
    assert "Retry-After" not in response.headers


def test_unavailable_errors_say_when_to_retry() -> None:
    response = error_response(ProtocolError(ErrorCode.UNAVAILABLE, "kafka down"))
    assert response.status == 503
    assert response.headers["Retry-After"] == "1"


def test_every_code_is_unique_with_an_error_status() -> None:
    codes = [code.code for code in ErrorCode]
    assert len(codes) == len(set(codes))
    assert all(400 <= code.status < 600 for code in ErrorCode)


def test_extra_fields_sit_beside_the_error() -> None:
    error = ProtocolError(ErrorCode.NOT_READY, "waiting for: kafka")
    response = error_response(error, {"Cache-Control": "no-store"}, ready=False)
    assert isinstance(response.body, bytes)
    body = {"error": {"code": "not_ready", "message": "waiting for: kafka"}, "ready": False}
    assert _body(response.body) == body
    assert response.headers["Cache-Control"] == "no-store"
    assert response.headers["Retry-After"] == "1"
