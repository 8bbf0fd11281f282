"""The OpenAPI document: the read extensions' query parameters and error code, which routes
need no token, and the 403 a peer-only header gets from outside when `peer_key_file` is set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from adapter.app import create_app
from adapter.config import Settings
from adapter.http.openapi import describe
from adapter.http.route_needs import is_public
from adapter.http.routes import table

Json = dict[str, Any]
METHODS = ("get", "put", "post", "delete", "head")


def document() -> Json:
    return describe(table())


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


async def _document(app: web.Application) -> Json:
    """`GET /openapi.json` as the app answers it."""
    request = make_mocked_request("GET", "/openapi.json", app=app)
    match = await app.router.resolve(request)
    match.add_app(app)
    request._match_info = match
    response = await match.handler(request)
    assert isinstance(response, web.Response)
    assert response.body is not None
    assert isinstance(response.body, bytes)
    document: Json = json.loads(response.body)
    return document


def _operations(document: Json) -> list[tuple[str, str, Json]]:
    return [
        (method, path, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if method in METHODS
    ]


async def test_with_a_peer_key_every_operation_lists_the_peer_header_403(tmp_path: Path) -> None:
    key = tmp_path / "peer.key"
    key.write_text("k" * 32)
    document = await _document(create_app(Settings(peer_key_file=str(key))))
    missing = [
        f"{method.upper()} {path}"
        for method, path, operation in _operations(document)
        if "forbidden" not in operation["responses"].get("403", {}).get("description", "")
    ]
    assert missing == []


async def test_without_a_peer_key_the_403_is_listed_only_where_a_route_refuses() -> None:
    document = await _document(create_app(Settings()))
    listed = {
        f"{method.upper()} {path}"
        for method, path, operation in _operations(document)
        if "403" in operation["responses"]
    }
    assert listed == {
        "POST /{bucket}/{stream}",
        "POST /v1/stream/{path}",
        "POST /{bucket}/{stream}/trim",
        "POST /v1/stream/{path}/trim",
    }


async def test_an_operation_asks_no_token_exactly_when_its_route_is_public() -> None:
    app = create_app(Settings())
    document = await _document(app)
    wrong = []
    for method, path, operation in _operations(document):
        concrete = path.replace("{name}", "index.html")
        request = make_mocked_request(method.upper(), concrete, app=app)
        match = await app.router.resolve(request)
        match.add_app(app)
        request._match_info = match
        if (operation.get("security") == []) != is_public(request):
            wrong.append(f"{method.upper()} {path}")
    assert wrong == []
