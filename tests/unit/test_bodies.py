"""Each route's body, as declared in its table entry: a control document (the default), a
stream's data held whole, or streamed."""

from __future__ import annotations

from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from adapter.http import routes
from adapter.http.bodies import CONTROL_BODY_BYTES, ROUTE_BODIES, Body, RouteBodies
from adapter.http.route_table import BUCKETED_STREAM, below, install


async def _matched(app: web.Application, method: str, path: str) -> web.Request:
    """A request with its route resolved, as aiohttp's handler has it by the middlewares."""
    request = make_mocked_request(method, path, app=app)
    request._match_info = await app.router.resolve(request)
    return request


async def test_only_a_snapshot_publish_streams_its_body_and_takes_the_snapshot_limit() -> None:
    app = web.Application()
    app[ROUTE_BODIES] = bodies = RouteBodies(held_bytes=10, streamed_bytes=1000)
    install(app, (below(BUCKETED_STREAM, routes.SNAPSHOT),))
    publish = await _matched(app, "PUT", "/b/s/snapshot/0000000000000000_0000000000000001")
    assert (bodies.body(publish), bodies.limit(publish), bodies.streamed(publish)) == (
        Body.STREAMED,
        1000,
        True,
    )
    for method in ("GET", "DELETE"):  # the same resource, other routes: a control's limit
        other = await _matched(app, method, "/b/s/snapshot/0000000000000000_0000000000000001")
        assert (bodies.body(other), bodies.limit(other)) == (Body.CONTROL, 10)
    unrouted = await _matched(app, "POST", "/nowhere")
    assert bodies.limit(unrouted) == 10


async def test_a_control_body_has_a_small_limit_of_its_own_a_data_route_the_held_one() -> None:
    app = web.Application()
    app[ROUTE_BODIES] = bodies = RouteBodies(held_bytes=10**6, streamed_bytes=10**9)
    data = app.router.add_post("/data", _answer)
    bodies.declare(data, Body.HELD)
    app.router.add_put("/control", _answer)
    control = await _matched(app, "PUT", "/control")
    held = await _matched(app, "POST", "/data")
    assert (bodies.body(control), bodies.limit(control)) == (Body.CONTROL, CONTROL_BODY_BYTES)
    assert (bodies.body(held), bodies.limit(held)) == (Body.HELD, 10**6)


async def test_a_control_body_is_never_allowed_more_than_a_held_one() -> None:
    app = web.Application()
    app[ROUTE_BODIES] = bodies = RouteBodies(held_bytes=10, streamed_bytes=1000, control_bytes=100)
    app.router.add_put("/control", _answer)
    assert bodies.limit(await _matched(app, "PUT", "/control")) == 10


async def _answer(_request: web.Request) -> web.Response:
    return web.Response()
