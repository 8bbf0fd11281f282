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


def test_the_bucket_config_route_is_conditional_and_its_refusals_documented() -> None:
    put = document()["paths"]["/{bucket}/config"]["put"]
    headers = {p["name"] for p in put.get("parameters", []) if p["in"] == "header"}
    assert "If-Match" in headers
    assert "precondition_failed" in put["responses"]["412"]["description"]
    assert "invalid_retention" in put["responses"]["400"]["description"]
    assert "mount_not_configurable" in put["responses"]["409"]["description"]
    schema = put["requestBody"]["content"]["application/json"]["schema"]
    assert schema["properties"]["retention"]["properties"]["max_age_ms"]["minimum"] == 1000
