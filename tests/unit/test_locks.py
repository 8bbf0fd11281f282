"""Keyed locks: one holder per key at a time, forgotten once nobody holds or awaits them."""

from __future__ import annotations

import asyncio

import pytest

from adapter.service.locks import KeyedLocks


async def test_one_holder_per_key_and_other_keys_are_free() -> None:
    locks, order = KeyedLocks(), []

    async def hold(key: str, name: str) -> None:
        async with locks.hold(key):
            order.append(f"{name} in")
            await asyncio.sleep(0.01)
            order.append(f"{name} out")

    await asyncio.gather(hold("a", "first"), hold("a", "second"), hold("b", "other"))
    first, second = order.index("first out"), order.index("second in")
    assert first < second
    assert order.index("other in") < order.index("first out")
    assert len(locks) == 0


async def test_a_waiter_cancelled_is_no_longer_a_user() -> None:
    locks = KeyedLocks()
    async with locks.hold("a"):
        waiter = asyncio.ensure_future(locks.hold("a").__aenter__())
        await asyncio.sleep(0)
        assert len(locks) == 1
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
    assert len(locks) == 0


async def test_the_lock_is_let_go_when_the_body_raises() -> None:
    locks = KeyedLocks()
    with pytest.raises(ValueError, match="boom"):
        async with locks.hold("a"):
            raise ValueError("boom")
    assert len(locks) == 0
    async with locks.hold("a"):
        assert len(locks) == 1
