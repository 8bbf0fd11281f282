"""The in-flight body budget: reservations by Content-Length, refusals past the limit."""

from __future__ import annotations

import asyncio
from unittest import mock

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from adapter.http.bodies import RouteBodies
from adapter.http.body_budget import BodyBudget, body_budget_middleware
from adapter.protocol.errors import ErrorCode, ProtocolError

BODIES = RouteBodies(held_bytes=100, streamed_bytes=1000)


def test_a_body_reserves_its_length_or_the_largest_body_when_unknown() -> None:
    budget = BodyBudget(limit=100, largest_body=40)
    assert (budget.cost(10), budget.cost(None), budget.cost(1000)) == (10, 40, 40)


def test_reservations_stop_at_the_limit_and_come_back_on_release() -> None:
    budget = BodyBudget(limit=100, largest_body=40)
    assert budget.reserve(40)
    assert budget.reserve(40)
    assert not budget.reserve(40)
    assert budget.reserve(20)
    budget.release(40)
    assert budget.in_flight == 60
    assert budget.reserve(40)


def _post(length: int) -> web.Request:
    headers = {"Content-Length": str(length)}
    return make_mocked_request("POST", "/b/s", headers=headers, payload=mock.Mock())


async def test_the_middleware_refuses_a_body_past_the_budget_before_the_handler() -> None:
    budget = BodyBudget(limit=100, largest_body=100)
    middleware = body_budget_middleware(budget, BODIES)
    entered, release = asyncio.Event(), asyncio.Event()

    async def slow(_request: web.Request) -> web.StreamResponse:
        entered.set()
        await release.wait()
        return web.Response(status=204)

    async def never(_request: web.Request) -> web.StreamResponse:
        raise AssertionError("a refused request must not reach its handler")

    async def hold() -> web.StreamResponse:
        return await middleware(_post(80), slow)

    held = asyncio.create_task(hold())
    await entered.wait()
    with pytest.raises(ProtocolError) as refused:
        await middleware(_post(30), never)
    assert refused.value.code is ErrorCode.UNAVAILABLE  # 503 with Retry-After when rendered
    assert (await middleware(make_mocked_request("GET", "/b/s"), bodyless)).status == 200
    release.set()
    assert (await held).status == 204
    assert budget.in_flight == 0


async def bodyless(_request: web.Request) -> web.StreamResponse:
    return web.Response(status=200)


async def test_a_failing_handler_gives_its_reservation_back() -> None:
    budget = BodyBudget(limit=100, largest_body=100)

    async def failing(_request: web.Request) -> web.StreamResponse:
        raise ProtocolError(ErrorCode.BAD_REQUEST, "no")

    with pytest.raises(ProtocolError):
        await body_budget_middleware(budget, BODIES)(_post(50), failing)
    assert budget.in_flight == 0
