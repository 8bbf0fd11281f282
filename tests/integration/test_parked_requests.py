"""What a parked live read holds: only the frames of middlewares with work left after it.

An idle SSE session or long-poll lives for minutes, and thousands of them at once are what
an instance's memory goes to (`make hostile`). A middleware that only checks a request before
it is served (host, peer headers, auth, codings, limits, readiness, forwarding of a read) has
nothing to do once the handler runs, so it must not stay suspended beside it.
"""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from adapter.app import create_app
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready

# The middlewares that work once the handler has answered: the request's log and metrics,
# the CORS headers, the response's coding, and errors rendered as JSON.
AFTER_THE_HANDLER = ["observe", "cors", "compression_middleware", "errors_middleware"]
PARKED_S = 30.0  # a bound on the wait for the handler to park, never a timing


def awaited_names(task: asyncio.Task[object]) -> list[str]:
    """The qualified names of the coroutines `task` is suspended in, outermost first."""
    names: list[str] = []
    coro: object = task.get_coro()
    while (code := getattr(coro, "cr_code", None)) is not None:
        names.append(code.co_qualname)
        coro = getattr(coro, "cr_await", None)
    return names


def middleware_names(app: web.Application) -> set[str]:
    return {getattr(m, "__qualname__", "").rsplit(".", 1)[-1] for m in app.middlewares}


async def held_middlewares(app: web.Application, handler: str) -> list[str]:
    """The middlewares suspended around the request task parked in `handler`."""
    names = middleware_names(app)
    deadline = asyncio.get_running_loop().time() + PARKED_S
    while asyncio.get_running_loop().time() < deadline:
        for task in asyncio.all_tasks():
            chain = awaited_names(task)
            if any(name.endswith(handler) for name in chain):
                return [n.rsplit(".", 1)[-1] for n in chain if n.rsplit(".", 1)[-1] in names]
        await asyncio.sleep(0.05)
    raise AssertionError(f"no request parked in {handler}")


@pytest.fixture
async def served(aiohttp_client: ClientFactory, make_settings: SettingsFactory) -> Client:
    client = await aiohttp_client(create_app(make_settings()))
    await wait_ready(client)
    for path in ("/parked", "/parked/text"):
        response = await client.put(path, headers={"Content-Type": "text/plain"})
        assert response.status == 201, await response.text()
    return client


@pytest.mark.parametrize(
    ("query", "handler"),
    [("offset=now&live=sse", "_SseSession._park"), ("offset=now&live=long-poll", "long_poll")],
)
async def test_a_parked_live_read_holds_only_middlewares_with_work_after_it(
    served: Client, query: str, handler: str
) -> None:
    request = asyncio.create_task(served.get(f"/parked/text?{query}"))
    try:
        held = await held_middlewares(served.app, handler)
        assert held == AFTER_THE_HANDLER
    finally:
        request.cancel()
