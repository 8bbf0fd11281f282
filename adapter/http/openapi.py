"""`GET /openapi.json`: the API described as OpenAPI 3.1, built from the app's route table.

Each operation comes from its route's `Doc` (`adapter/http/routes.py`), its path parameters
from the route's template, and its statuses from the `Doc` plus those every route may answer:
503, and the refusals of middlewares that apply to every route (`refused`, e.g. 403 for a
peer-only header when `peer_key_file` is set).
"""

from __future__ import annotations

from collections.abc import Iterable

from aiohttp import web

from adapter.http import api_schemas as schemas
from adapter.http.api_schemas import Json
from adapter.http.render import json_response
from adapter.http.route_table import ROUTES, Doc, Op, Route, Table
from adapter.http.statuses import status_of
from adapter.protocol.errors import ErrorCode

PATH = "/openapi.json"  # a '.' is never in a bucket id, so this can never name a bucket
# The error codes middlewares in front of every route may answer (set by the app factory).
REFUSED = web.AppKey("refused", frozenset[ErrorCode])


def describe(table: Table, refused: Iterable[ErrorCode] = ()) -> Json:
    """The whole OpenAPI 3.1 document of the routes in `table`."""
    statuses = frozenset(status_of(code) for code in refused)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "durable-kafka",
            "version": "1",
            "description": "The Durable Streams HTTP protocol, with every byte kept in Kafka.",
        },
        "paths": {route.template: _path_item(route, statuses) for route in table if _any(route)},
        "components": {
            "schemas": {"Error": _error_schema()},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        # `{}`: anonymous requests are served too, as they are while authentication is off.
        "security": [{"bearer": []}, {}],
    }


def _any(route: Route) -> bool:
    return any(op.doc is not None for op in route.ops)


def _path_item(route: Route, refused: frozenset[int]) -> Json:
    item: Json = {
        op.method.lower(): _operation(op, op.doc, refused) for op in route.ops if op.doc is not None
    }
    names = [part[1:-1] for part in route.template.split("/") if part.startswith("{")]
    if names:
        item["parameters"] = [_path_param(name) for name in names]
    return item


def _operation(op: Op, doc: Doc, refused: frozenset[int]) -> Json:
    responses: Json = {
        str(status): {"description": text, "headers": _response_headers()}
        for status, text in doc.ok.items()
    }
    for status in sorted({*doc.errors, *refused, 503}):
        responses[str(status)] = {
            "description": ", ".join(sorted(_codes(status))),
            "content": {"application/json": {"schema": schemas.ERROR}},
            "headers": _response_headers(),
        }
    operation: Json = {"summary": doc.summary, "responses": responses}
    parameters = [_param(name, "query", schemas.QUERY[name]) for name in doc.query]
    parameters += [_param(name, "header", schemas.REQUEST_HEADERS[name]) for name in doc.headers]
    if parameters:
        operation["parameters"] = parameters
    if doc.body:
        operation["requestBody"] = {
            "required": False,
            "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
        }
    if doc.schema is not None:
        operation["requestBody"] = {
            "required": doc.schema_required,
            "content": {"application/json": {"schema": doc.schema}},
        }
    if op.need is None:
        operation["security"] = []
    return _linked(operation, doc)


def _linked(operation: Json, doc: Doc) -> Json:
    """The operation named, and on its link's status, linked to the workflow's next operation:
    the create → append → read workflow a stateful fuzzer follows."""
    if doc.operation_id is not None:
        operation["operationId"] = doc.operation_id
    if doc.link is not None:
        status = str(doc.link.status)
        to = {"operationId": doc.link.to, "parameters": dict(doc.link.parameters)}
        operation["responses"][status] = operation["responses"][status] | {
            "links": {doc.link.to: to}
        }
    return operation


def _codes(status: int) -> set[str]:
    return {code.code for code in ErrorCode if status_of(code) == status}


def _response_headers() -> Json:
    return {
        name: {"description": text, "schema": schemas.TEXT}
        for name, text in schemas.RESPONSE_HEADERS.items()
    }


def _path_param(name: str) -> Json:
    text, schema = schemas.PATH_PARAMS[name]
    return _param(name, "path", text, True, schema)


def _param(
    name: str, where: str, text: str, required: bool = False, schema: Json | None = None
) -> Json:
    return {
        "name": name,
        "in": where,
        "required": required,
        "description": text,
        "schema": schemas.TEXT | (schema or {}),
    }


def _error_schema() -> Json:
    return {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {
                    "code": {"enum": sorted({code.code for code in ErrorCode})},
                    "message": schemas.TEXT,
                },
            }
        },
    }


async def openapi(request: web.Request) -> web.Response:
    refused: frozenset[ErrorCode] = request.app[REFUSED]
    document = describe(request.app[ROUTES], refused)
    return json_response(document, headers={"Cache-Control": "no-cache"})
