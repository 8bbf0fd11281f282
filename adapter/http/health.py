"""`/healthz` (the process answers) and `/readyz` (Kafka reachable, topics verified)."""

from __future__ import annotations

from aiohttp import web

from adapter.http.render import json_response
from adapter.protocol.errors import ErrorCode
from adapter.readiness import Readiness

READINESS = web.AppKey("readiness", Readiness)
NO_STORE = {"Cache-Control": "no-store"}

routes = web.RouteTableDef()


@routes.get("/healthz")
async def healthz(_request: web.Request) -> web.Response:
    return json_response({"status": "ok"}, headers=NO_STORE)


@routes.get("/readyz")
async def readyz(request: web.Request) -> web.Response:
    readiness = request.app[READINESS]
    report = readiness.report()
    if readiness.ready:
        return json_response(report, headers=NO_STORE)
    waiting = ", ".join(readiness.failing())
    error = {"code": ErrorCode.NOT_READY.code, "message": f"waiting for: {waiting}"}
    headers = NO_STORE | {"Retry-After": "1"}
    return json_response({"error": error} | report, status=503, headers=headers)
