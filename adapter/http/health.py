"""`/healthz` (liveness: the process and its event loop answer) and `/readyz` (readiness, with
every check and its fields: `adapter/readiness.py` says which make an instance unready)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from adapter.http.render import error_response, json_response
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.readiness import Readiness

READINESS = web.AppKey("readiness", Readiness)
# The check a stopping process fails first, so load balancers stop sending it requests.
SERVING = "serving"
NO_STORE = {"Cache-Control": "no-store"}


async def healthz(_request: web.Request) -> web.Response:
    return json_response({"status": "ok"}, headers=NO_STORE)


async def readyz(request: web.Request) -> web.Response:
    return readiness_answer(request.app[READINESS])


def readiness_answer(readiness: Readiness, **extra: Any) -> web.Response:
    """200 with every check when ready, else 503 `not_ready` naming what it waits for."""
    report = {**readiness.report(), **extra}
    if readiness.ready:
        return json_response(report, headers=NO_STORE)
    waiting = ProtocolError(ErrorCode.NOT_READY, f"waiting for: {', '.join(readiness.waiting())}")
    return error_response(waiting, NO_STORE, **report)
