"""The live hub: one wake-up reaches every waiter of a stream, and nothing is kept after."""

from __future__ import annotations

import asyncio

from adapter.service.hub import LiveHub


async def test_notify_wakes_every_waiter_of_that_stream_only() -> None:
    hub = LiveHub()
    waiters = [asyncio.create_task(hub.wait("a", 5)) for _ in range(100)]
    other = asyncio.create_task(hub.wait("b", 0.2))
    await asyncio.sleep(0)
    assert (hub.watched, hub.waiters) == (2, 101)
    hub.notify("a")
    assert await asyncio.gather(*waiters) == [True] * 100
    assert await other is False
    assert (hub.watched, hub.waiters) == (0, 0)


async def test_timeouts_and_cancellation_release_their_entries() -> None:
    hub = LiveHub()
    assert await hub.wait("a", 0.01) is False
    assert await hub.wait("a", 0) is False
    task = asyncio.create_task(hub.wait("a", 5))
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert hub.watched == 0
    hub.notify("nobody")  # notifying an unwatched stream is a no-op
    assert hub.watched == 0


async def test_a_listener_hears_every_change_of_its_stream_until_removed() -> None:
    hub = LiveHub()
    heard: list[str] = []
    hub.listen("a", lambda: heard.append("a"))
    hub.notify("a")
    hub.notify("b")
    hub.notify("a")
    hub.listen("a", None)
    hub.notify("a")
    assert heard == ["a", "a"]


async def test_a_streams_first_waiter_or_listener_is_told_and_the_last_one_leaves_no_trace() -> (
    None
):
    hub = LiveHub()
    told: list[object] = []
    hub.on_watched = told.append
    first = asyncio.create_task(hub.wait("a", 5))
    second = asyncio.create_task(hub.wait("a", 5))
    await asyncio.sleep(0)
    hub.listen("b", lambda: None)
    assert told == ["a", "b"]  # once per stream, not per waiter
    assert hub.watching("a")
    assert hub.watching("b")
    hub.notify("a")
    await asyncio.gather(first, second)
    hub.listen("b", None)
    assert not hub.watching("a")
    assert not hub.watching("b")
    await asyncio.wait_for(hub.wait("a", 0.01), 1)
    assert told == ["a", "b", "a"]  # watched again after nobody was
