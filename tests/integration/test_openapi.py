"""`GET /openapi.json` describes every route the app serves (walked from its router)."""

from __future__ import annotations

from typing import Any

from adapter.http.openapi import PATH
from adapter.protocol.errors import ErrorCode
from tests.conftest import Client


def _served(client: Client) -> set[tuple[str, str]]:
    return {
        (route.method.lower(), route.resource.canonical)
        for route in client.app.router.routes()
        if route.resource is not None and route.method != "*"  # catch-alls answer 404/405
    }


async def test_every_served_route_is_described(client: Client) -> None:
    response = await client.get(PATH)
    assert response.status == 200
    spec: dict[str, Any] = await response.json()
    assert spec["openapi"].startswith("3.1")
    described = {(method, path) for path, item in spec["paths"].items() for method in item}
    missing = {
        (method, path)
        for method, path in _served(client)
        # HEAD answers as GET without a body (RFC 9110 §9.3.2)
        if (method, path) not in described and not (method == "head" and ("get", path) in described)
    }
    assert missing == set()
    assert spec["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"


async def test_error_statuses_carry_the_error_body(client: Client) -> None:
    spec: dict[str, Any] = await (await client.get(PATH)).json()
    codes = spec["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["code"]
    assert set(codes["enum"]) == {code.code for code in ErrorCode}
    append = spec["paths"]["/{bucket}/{stream}"]["post"]["responses"]
    assert append["409"]["content"]["application/json"]["schema"]["$ref"].endswith("/Error")
    assert "stream_closed" in append["409"]["description"]
    assert "503" in append
    assert "500" not in append


async def test_the_document_is_not_a_bucket(client: Client) -> None:
    response = await client.put(PATH)
    assert response.status == 400
    assert (await response.json())["error"]["code"] == "invalid_bucket_id"
