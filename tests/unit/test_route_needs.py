"""Every route the app serves has an operation class, written out here: a new route fails this
until someone decides what scope it needs."""

from __future__ import annotations

import re

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from adapter.app import create_app
from adapter.auth.policy import Need
from adapter.auth.scopes import Operation
from adapter.config import Settings
from adapter.http.route_needs import is_public, need_of, needs_of
from adapter.http.route_table import ROUTES, public_paths, sub_resources
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.identifiers import check_compat_creatable

R, A, D = Operation.READ, Operation.APPEND, Operation.ADMIN
PUBLIC = None
# (method, route template) -> the operation it needs, and a concrete path to try it with.
EXPECTED: dict[tuple[str, str], tuple[Operation | None, str]] = {
    ("GET", "/healthz"): (PUBLIC, "/healthz"),
    ("HEAD", "/healthz"): (PUBLIC, "/healthz"),
    ("GET", "/readyz"): (PUBLIC, "/readyz"),
    ("HEAD", "/readyz"): (PUBLIC, "/readyz"),
    ("GET", "/openapi.json"): (PUBLIC, "/openapi.json"),
    ("HEAD", "/openapi.json"): (PUBLIC, "/openapi.json"),
    ("PUT", "/{bucket}"): (D, "/logs"),
    ("GET", "/{bucket}"): (R, "/logs"),
    ("HEAD", "/{bucket}"): (R, "/logs"),
    ("DELETE", "/{bucket}"): (D, "/logs"),
    ("PUT", "/{bucket}/config"): (D, "/logs/config"),
    ("GET", "/{bucket}/streams"): (R, "/logs/streams"),
    ("HEAD", "/{bucket}/streams"): (R, "/logs/streams"),
    ("PUT", "/{bucket}/{stream}"): (D, "/logs/s"),
    ("POST", "/{bucket}/{stream}"): (A, "/logs/s"),
    ("GET", "/{bucket}/{stream}"): (R, "/logs/s"),
    ("HEAD", "/{bucket}/{stream}"): (R, "/logs/s"),
    ("DELETE", "/{bucket}/{stream}"): (D, "/logs/s"),
    ("PUT", "/v1/stream/{path}"): (D, "/v1/stream/logs/s"),
    ("POST", "/v1/stream/{path}"): (A, "/v1/stream/logs/s"),
    ("GET", "/v1/stream/{path}"): (R, "/v1/stream/logs/s"),
    ("HEAD", "/v1/stream/{path}"): (R, "/v1/stream/logs/s"),
    ("DELETE", "/v1/stream/{path}"): (D, "/v1/stream/logs/s"),
    ("GET", "/{bucket}/{stream}/snapshot"): (R, "/logs/s/snapshot"),
    ("PUT", "/{bucket}/{stream}/snapshot/{offset}"): (D, "/logs/s/snapshot/x"),
    ("GET", "/{bucket}/{stream}/snapshot/{offset}"): (R, "/logs/s/snapshot/x"),
    ("DELETE", "/{bucket}/{stream}/snapshot/{offset}"): (D, "/logs/s/snapshot/x"),
    ("GET", "/{bucket}/{stream}/bootstrap"): (R, "/logs/s/bootstrap"),
    ("GET", "/v1/stream/{path}/snapshot"): (R, "/v1/stream/logs/s/snapshot"),
    ("PUT", "/v1/stream/{path}/snapshot/{offset}"): (D, "/v1/stream/logs/s/snapshot/x"),
    ("GET", "/v1/stream/{path}/snapshot/{offset}"): (R, "/v1/stream/logs/s/snapshot/x"),
    ("DELETE", "/v1/stream/{path}/snapshot/{offset}"): (D, "/v1/stream/logs/s/snapshot/x"),
    ("GET", "/v1/stream/{path}/bootstrap"): (R, "/v1/stream/logs/s/bootstrap"),
}

# The web console's routes: its files and mode are public; its API reads (every bucket's ids
# need a read:* scope); any other /ui/api/ path needs only a valid token (then 404).
CONSOLE: dict[tuple[str, str], tuple[Need | None, str]] = {
    (method, template): (need, path)
    for template, need, path in [
        ("/ui", None, "/ui"),
        ("/ui/{name}", None, "/ui/index.html"),
        ("/ui/api/config", None, "/ui/api/config"),
        ("/ui/api/buckets", Need(R, ""), "/ui/api/buckets"),
        ("/ui/api/stream/{b}/{s}", Need(R, "logs"), "/ui/api/stream/logs/s"),
        ("/ui/api/seek/{b}/{s}", Need(R, "logs"), "/ui/api/seek/logs/s"),
        ("/ui/api/records/{b}/{s}", Need(R, "logs"), "/ui/api/records/logs/s"),
    ]
    for method in ("GET", "HEAD")
} | {("*", "/ui/api/{rest}"): (Need(None), "/ui/api/nothing")}
# Fencing a stream: append or admin scope.
FENCE = {
    ("POST", "/{bucket}/{stream}/fence"): "/logs/s/fence",
    ("POST", "/v1/stream/{path}/fence"): "/v1/stream/logs/s/fence",
}
# Trimming a stream removes data for every reader: admin scope only.
TRIM = {
    ("POST", "/{bucket}/{stream}/trim"): "/logs/s/trim",
    ("POST", "/v1/stream/{path}/trim"): "/v1/stream/logs/s/trim",
}


@pytest.fixture(scope="module")
def app() -> web.Application:
    return create_app(Settings())


def served(app: web.Application) -> set[tuple[str, str]]:
    return {
        (route.method, route.resource.canonical)
        for route in app.router.routes()
        if route.resource is not None
    }


def test_every_served_route_is_in_the_table(app: web.Application) -> None:
    assert served(app) == set(EXPECTED) | set(CONSOLE) | set(FENCE) | set(TRIM)


@pytest.mark.parametrize(("method", "template"), sorted(FENCE))
async def test_a_fence_needs_append_or_admin(
    app: web.Application, method: str, template: str
) -> None:
    request = make_mocked_request(method, FENCE[(method, template)], app=app)
    match = await app.router.resolve(request)
    assert match.route.resource is not None
    assert match.route.resource.canonical == template
    assert need_of(resolved(request, match)) == Need(A, "logs", or_else=D)


@pytest.mark.parametrize(("method", "template"), sorted(EXPECTED))
async def test_each_route_needs_its_operation(
    app: web.Application, method: str, template: str
) -> None:
    operation, path = EXPECTED[(method, template)]
    request = make_mocked_request(method, path, app=app)
    match = await app.router.resolve(request)
    assert match.route.resource is not None
    assert match.route.resource.canonical == template
    if operation is PUBLIC:
        assert path in public_paths(app[ROUTES])
        assert is_public(resolved(request, match))
        return
    assert need_of(resolved(request, match)) == Need(operation, "logs")


@pytest.mark.parametrize(("method", "template"), sorted(CONSOLE))
async def test_each_console_route_needs_its_operation(
    app: web.Application, method: str, template: str
) -> None:
    need, path = CONSOLE[(method, template)]
    request = resolved(*await _matched(app, "GET" if method == "*" else method, path))
    assert request.match_info.route.resource is not None
    assert request.match_info.route.resource.canonical == template
    assert is_public(request) == (need is None)
    assert need_of(request) == (Need(None) if need is None else need)  # rate limits ask too


async def _matched(
    app: web.Application, method: str, path: str
) -> tuple[web.Request, web.UrlMappingMatchInfo]:
    request = make_mocked_request(method, path, app=app)
    return request, await app.router.resolve(request)


async def test_a_path_no_route_serves_needs_only_a_token(app: web.Application) -> None:
    request = make_mocked_request("GET", "/a/b/c/d/e", app=app)
    match = await app.router.resolve(request)
    assert match.http_exception is not None
    assert need_of(resolved(request, match)) == Need(None)


def resolved(request: web.Request, match: web.UrlMappingMatchInfo) -> web.Request:
    """The request as routing leaves it, with its match and app (as aiohttp's own handler
    sets them)."""
    match.add_app(request.app)
    request._match_info = match
    return request


@pytest.mark.parametrize(("method", "template"), sorted(TRIM))
async def test_a_trim_needs_admin(app: web.Application, method: str, template: str) -> None:
    request = make_mocked_request(method, TRIM[(method, template)], app=app)
    match = await app.router.resolve(request)
    assert match.route.resource is not None
    assert match.route.resource.canonical == template
    assert need_of(resolved(request, match)) == Need(D, "logs")


@pytest.mark.parametrize(
    ("path", "source", "needs"),
    [
        ("/logs/f", "/other/s", [Need(D, "logs"), Need(R, "other")]),
        ("/logs/f", "http://host:4437/v1/stream/other/s", [Need(D, "logs"), Need(R, "other")]),
        ("/v1/stream/logs/f", "/other/s", [Need(D, "logs"), Need(R, "other")]),
        ("/logs/f", "/logs/s", [Need(D, "logs")]),  # a fork of its own bucket: admin only
        ("/logs/f", "/not a path", [Need(D, "logs")]),  # the handler refuses it (400)
        ("/logs/f/snapshot/0000000000000000_0000000000000001", "/other/s", [Need(D, "logs")]),
    ],
)
async def test_a_fork_of_another_buckets_stream_also_needs_to_read_that_bucket(
    app: web.Application, path: str, source: str, needs: list[Need]
) -> None:
    headers = {"Stream-Forked-From": source}
    request = make_mocked_request("PUT", path, headers=headers, app=app)
    assert needs_of(resolved(request, await app.router.resolve(request))) == needs


def test_every_flat_sub_resource_url_is_refused_as_a_stream_path(app: web.Application) -> None:
    """A stream created at `/v1/stream/{path}/trim` (or any other sub-resource's URL) could
    never be written: that URL is another stream's sub-resource. Every one the route table
    has is refused, so a new sub-resource is reserved as it is declared."""
    suffixes = sub_resources(app[ROUTES])
    assert {"snapshot", "snapshot/{offset}", "bootstrap", "fence", "trim"} <= set(suffixes)
    for suffix in suffixes:
        path = "logs/s/" + re.sub(r"\{[^}]+\}", "0", suffix)
        with pytest.raises(ProtocolError) as raised:
            check_compat_creatable(path, suffixes)
        assert raised.value.code is ErrorCode.INVALID_STREAM_ID, path
