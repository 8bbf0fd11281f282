"""A route declared once in the table is served, judged, forwarded, reserved and described:
a made-up route added to the table shows up in the router, the auth needs, the forwarding
decision, the flat surface's reserved stream paths and `/openapi.json`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from adapter.app import create_app
from adapter.auth.policy import Need
from adapter.auth.scopes import Operation
from adapter.config import Settings
from adapter.http import routes
from adapter.http.bodies import ROUTE_BODIES, Body
from adapter.http.forward import write_of
from adapter.http.route_needs import is_public, need_of
from adapter.http.route_table import (
    BUCKETED_STREAM,
    FLAT_STREAM,
    ROUTES,
    Doc,
    Op,
    Owner,
    Route,
    Table,
    below,
    op_of,
    sub_resources,
)
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.identifiers import (
    BUCKET_ID_PATTERN,
    RESERVED_BUCKET_IDS,
    check_compat_creatable,
)

Json = dict[str, Any]


async def _rewind(request: web.Request) -> web.Response:
    return web.Response(status=204)


def _rewind_need(request: web.Request) -> Need:
    return Need(Operation.ADMIN, "made-up")


# A sub-resource of every stream: `POST {stream}/rewind`, admin of a made-up bucket, forwarded
# to the stream's owner, with a streamed body.
REWIND = Route(
    "rewind",
    (
        Op(
            "POST",
            _rewind,
            _rewind_need,
            Owner.STREAM_STATE,
            Body.STREAMED,
            Doc("rewind the stream", {204: "rewound"}, (400, 404)),
        ),
    ),
    below_stream="rewind",
)


def _with_rewind() -> Table:
    """The default table, the made-up route under each surface where sub-resources go."""
    table = list(routes.table())
    flat = table.index(next(r for r in table if r.path == FLAT_STREAM))
    table.insert(flat, below(FLAT_STREAM, REWIND))
    table.insert(table.index(routes.BUCKET), below(BUCKETED_STREAM, REWIND))
    return tuple(table)


@pytest.fixture(scope="module")
def app() -> web.Application:
    return create_app(Settings(), table=_with_rewind())


async def _matched(app: web.Application, method: str, path: str) -> web.Request:
    request = make_mocked_request(method, path, app=app)
    match = await app.router.resolve(request)
    match.add_app(app)
    request._match_info = match
    return request


@pytest.mark.parametrize("path", ["/logs/s/rewind", "/v1/stream/logs/s/rewind"])
async def test_a_route_added_to_the_table_is_routed_judged_and_forwarded(
    app: web.Application, path: str
) -> None:
    request = await _matched(app, "POST", path)
    assert request.match_info.handler is _rewind
    assert op_of(request) is not None
    assert need_of(request) == Need(Operation.ADMIN, "made-up")
    assert not is_public(request)
    assert app[ROUTE_BODIES].body(request) is Body.STREAMED
    write = write_of(request)
    assert write is not None
    assert (write.bucket_id, write.stream_id, write.creates, write.snapshot) == (
        "logs",
        "s",
        False,
        False,
    )


def test_a_stream_sub_resource_added_to_the_table_is_reserved(app: web.Application) -> None:
    assert "rewind" in sub_resources(app[ROUTES])
    with pytest.raises(ProtocolError) as raised:
        check_compat_creatable("logs/s/rewind", sub_resources(app[ROUTES]))
    assert raised.value.code is ErrorCode.INVALID_STREAM_ID


async def test_a_route_added_to_the_table_is_described(app: web.Application) -> None:
    request = await _matched(app, "GET", "/openapi.json")
    response = await request.match_info.handler(request)
    assert isinstance(response, web.Response)
    assert isinstance(response.body, bytes)
    paths: Json = json.loads(response.body)["paths"]
    for path in ("/{bucket}/{stream}/rewind", "/v1/stream/{path}/rewind"):
        post = paths[path]["post"]
        assert post["summary"] == "rewind the stream"
        assert set(post["responses"]) == {"204", "400", "404", "503"}
        assert [p["name"] for p in paths[path]["parameters"]][-1] in ("stream", "path")


def test_every_route_but_a_catch_all_is_described() -> None:
    for mode in ("rw", "ro", "off"):
        for route in routes.table(mode):
            assert route.path.startswith("/"), route.path
            for op in route.ops:
                assert (op.doc is None) == (op.method == "*"), (op.method, route.path)


def test_a_console_that_is_off_is_not_described() -> None:
    paths = {route.template for route in routes.table("off")}
    assert {"/ui", "/ui/{rest}"} <= paths
    assert not any(
        op.doc for route in routes.table("off") if route.path.startswith("/ui") for op in route.ops
    )


def test_every_single_segment_route_that_could_be_a_bucket_id_is_reserved() -> None:
    """The protocol layer keeps its own list (it imports no HTTP): the table keeps it true."""
    for mode in ("rw", "ro", "off"):
        for route in routes.table(mode):
            segment = route.path.removeprefix("/")
            if "/" not in segment and "{" not in segment and BUCKET_ID_PATTERN.fullmatch(segment):
                assert segment in RESERVED_BUCKET_IDS, route.path
