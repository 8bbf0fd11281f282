"""The trim route: `POST {stream}/trim` with `{"before": "<offset token>"}` removes the
stream's messages below that offset (`adapter/protocol/trims.py` reads the body,
`stream_machine.trim` decides). Administrators only: it removes data for every reader."""

from __future__ import annotations

from aiohttp import web

from adapter.http.keys import STREAMS
from adapter.http.operations import admin_of_stream, mark
from adapter.http.request_checks import defer_continue
from adapter.http.streams import stream_ref
from adapter.protocol.commands import Trim
from adapter.protocol.offsets import encode
from adapter.protocol.snapshots import EARLIEST_HEADER
from adapter.protocol.trims import parse_trim


async def trim(request: web.Request) -> web.Response:
    """204 with the stream's earliest offset after the trim, also when it changed nothing."""
    before = parse_trim(await request.read())
    meta = await request.app[STREAMS].trim(Trim(stream_ref(request), before))
    headers = {
        EARLIEST_HEADER: encode(meta.earliest_offset),
        "Stream-Next-Offset": encode(meta.next_offset),
    }
    return web.Response(status=204, headers=headers)


def add_routes(app: web.Application, stream: str) -> None:
    """The trim route under `stream`, `streams.FLAT_ROUTE` or `streams.BUCKETED_ROUTE`
    (placed in the routing order as the snapshot routes are, `app.py`)."""
    resource = app.router.add_resource(stream + "/trim")
    route = resource.add_route("POST", trim, expect_handler=defer_continue)
    mark(app, route, admin_of_stream)
