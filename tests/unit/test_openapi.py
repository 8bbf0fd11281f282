"""The OpenAPI document describes the read extensions' query parameters and error code."""

from __future__ import annotations

from adapter.http.openapi import document


def _query(method: str) -> set[str]:
    operation = document()["paths"]["/{bucket}/{stream}"][method]
    return {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}


def test_reads_name_at_and_their_bounds() -> None:
    assert {"offset", "at", "max_bytes", "max_messages"} <= _query("get")
    assert _query("head") == {"at"}


def test_a_bad_time_is_a_documented_400() -> None:
    get = document()["paths"]["/{bucket}/{stream}"]["get"]
    assert "invalid_time" in get["responses"]["400"]["description"]
