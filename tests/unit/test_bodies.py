"""Each route's body, as declared with the route: held (the default) or streamed."""

from __future__ import annotations

from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from adapter.http import snapshots
from adapter.http.bodies import ROUTE_BODIES, Body, RouteBodies
from adapter.http.streams import BUCKETED_ROUTE


async def _matched(app: web.Application, method: str, path: str) -> web.Request:
    """A request with its route resolved, as aiohttp's handler has it by the middlewares."""
    request = make_mocked_request(method, path, app=app)
    request._match_info = await app.router.resolve(request)
    return request


async def test_only_a_snapshot_publish_streams_its_body_and_takes_the_snapshot_limit() -> None:
    app = web.Application()
    app[ROUTE_BODIES] = bodies = RouteBodies(held_bytes=10, streamed_bytes=1000)
    snapshots.add_routes(app, BUCKETED_ROUTE)
    publish = await _matched(app, "PUT", "/b/s/snapshot/0000000000000000_0000000000000001")
    assert (bodies.body(publish), bodies.limit(publish), bodies.streamed(publish)) == (
        Body.STREAMED,
        1000,
        True,
    )
    for method in ("GET", "DELETE"):  # the same resource, other routes: held, the usual limit
        other = await _matched(app, method, "/b/s/snapshot/0000000000000000_0000000000000001")
        assert (bodies.body(other), bodies.limit(other)) == (Body.HELD, 10)
    unrouted = await _matched(app, "POST", "/nowhere")
    assert bodies.limit(unrouted) == 10
