"""`/healthz` and `/readyz` of the ops listener under `serve --workers N`: they answer for the
whole pod, not for the one worker whose port a probe names.

A worker whose event loop is wedged (a stall, a deadlock, a SIGSTOP) still holds its share of
the main port (`SO_REUSEPORT`: the kernel goes on handing it connections, which then hang), yet
a probe of worker 0 alone would keep the pod Live and Ready. So each worker's ops listener also
asks every sibling, over the sibling channel (its Unix socket, the main app's own per-process
`/healthz` or `/readyz`: no recursion), within `SIBLING_TIMEOUT_S`, and fails as soon as one does
not answer in time. A sibling that answers "not ready" does not fail the pod's readiness: a
worker takes no connection on the shared port until it is ready (a restarted one replaying),
and the dependencies its readiness checks are this worker's too. Its answer is in the body.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

import aiohttp
from aiohttp import web

from adapter.http import health
from adapter.http.render import error_response, json_response
from adapter.protocol.errors import ErrorCode, ProtocolError

# Under the probes' own timeouts (the chart's readiness probe allows 2 s): a sibling whose loop
# takes longer than this to answer a probe is wedged for every client it holds.
SIBLING_TIMEOUT_S = 1.0
NO_ANSWER = "no answer"

SIBLINGS = web.AppKey("siblings", dict[str, str])  # a sibling's name -> its Unix socket


def add_pod_routes(app: web.Application, siblings: Mapping[str, str]) -> None:
    """The pod's `/healthz` and `/readyz` (`siblings`: each sibling's URL -> its socket)."""
    app[SIBLINGS] = {Path(path).stem: path for path in siblings.values()}
    app.router.add_get("/healthz", pod_healthz)
    app.router.add_get("/readyz", pod_readyz)


async def pod_healthz(request: web.Request) -> web.Response:
    answers = await _ask(request.app[SIBLINGS], "/healthz")
    silent = [name for name, answer in answers.items() if answer == NO_ANSWER]
    if silent:
        return error_response(_wedged(silent), health.NO_STORE, siblings=answers)
    return json_response({"status": "ok", "siblings": answers}, headers=health.NO_STORE)


async def pod_readyz(request: web.Request) -> web.Response:
    readiness = request.app[health.READINESS]
    answers = await _ask(request.app[SIBLINGS], "/readyz")
    silent = [name for name, answer in answers.items() if answer == NO_ANSWER]
    if readiness.ready and silent:
        return error_response(
            _wedged(silent), health.NO_STORE, siblings=answers, **readiness.report()
        )
    return health.readiness_answer(readiness, siblings=answers)


def _wedged(silent: list[str]) -> ProtocolError:
    return ProtocolError(
        ErrorCode.WORKER_UNRESPONSIVE,
        f"{', '.join(sorted(silent))} did not answer within {SIBLING_TIMEOUT_S:g} s",
    )


async def _ask(siblings: dict[str, str], path: str) -> dict[str, str]:
    """Each sibling's answer to `path`: `ok`, `not ready` or `no answer`."""
    names = sorted(siblings)
    answers = await asyncio.gather(*(_answer(siblings[name], path) for name in names))
    return dict(zip(names, answers, strict=True))


async def _answer(socket_path: str, path: str) -> str:
    try:
        async with (
            asyncio.timeout(SIBLING_TIMEOUT_S),
            aiohttp.ClientSession(connector=aiohttp.UnixConnector(socket_path)) as session,
            session.get(f"http://worker{path}") as reply,
        ):
            return "ok" if reply.status == 200 else "not ready"
    except (TimeoutError, aiohttp.ClientError, OSError):
        return NO_ANSWER
