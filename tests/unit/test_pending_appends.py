"""A stream's appends in flight: pending state, settling, and a failure breaking the chain."""

from __future__ import annotations

import asyncio

import pytest

from adapter.log.errors import LogUnavailable
from adapter.log.writer import Record, WriteBatch
from adapter.protocol.model import StreamMeta
from adapter.protocol.producers import ProducerPosition
from adapter.service.pending_appends import Chains

KEY = ("b", "s")
META = StreamMeta("b", "s", 0, "text/plain", 0, 0, 5, 0, 0)


def _queued() -> WriteBatch:
    batch = WriteBatch([Record("t", 0, b"k", b"v")], lambda _offsets: [])
    batch.future = asyncio.get_running_loop().create_future()
    return batch


async def test_a_chain_lives_while_a_batch_of_it_is_in_flight() -> None:
    chains = Chains()
    first, second = _queued(), _queued()
    chains.extend(KEY, META, first, ("p", ProducerPosition(0, 0)))
    chains.extend(KEY, META.evolve(closed=True), second, None)
    chain = chains.get(KEY)
    assert chain is not None
    assert chain.last is second
    assert chain.meta.closed
    assert chain.producers == {"p": ProducerPosition(0, 0)}
    first.future.set_result([5])
    second.future.set_result([6])
    await asyncio.sleep(0)
    assert chains.get(KEY) is None
    assert len(chains) == 0


async def test_a_failed_batch_breaks_its_chain() -> None:
    chains = Chains()
    first, second = _queued(), _queued()
    chains.extend(KEY, META, first, None)
    chains.extend(KEY, META, second, None)
    first.fail(LogUnavailable("kafka"))
    await asyncio.sleep(0)
    chain = chains.get(KEY)
    assert chain is not None
    assert chain.broken


async def test_settle_waits_for_the_last_batch_and_is_bounded() -> None:
    chains = Chains()
    batch = _queued()
    chains.extend(KEY, META, batch, None)
    with pytest.raises(LogUnavailable):
        await chains.settle(KEY, 0.01)
    asyncio.get_running_loop().call_soon(batch.future.set_result, [5])
    await chains.settle(KEY, 1)
    assert chains.get(KEY) is None


async def test_a_chain_outlives_a_failed_last_batch_while_an_earlier_one_commits() -> None:
    """An append whose commit is being learned, then a later one that expires in the queue:
    the stream still has a write in flight, so a retry must not be decided on the committed
    state (it would write the first append's producer seq again)."""
    chains = Chains()
    first, second = _queued(), _queued()
    chains.extend(KEY, META, first, ("p", ProducerPosition(0, 7)))
    chains.extend(KEY, META, second, None)
    second.fail(LogUnavailable("expired in the queue"))
    await asyncio.sleep(0)
    chain = chains.get(KEY)
    assert chain is not None
    assert chain.broken
    assert chain.producers == {"p": ProducerPosition(0, 7)}
    with pytest.raises(LogUnavailable):
        await chains.settle(KEY, 0.01)  # settling waits for the first one too
    asyncio.get_running_loop().call_soon(first.future.set_result, [5])
    await chains.settle(KEY, 1)
    assert chains.get(KEY) is None
