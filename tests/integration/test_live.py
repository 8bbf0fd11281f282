"""Long-poll and SSE on a real broker: waking, timeouts, closure, and the meta follower."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from aiohttp import web
from confluent_kafka import Producer

from adapter.app import PARTS, SETTINGS
from adapter.log.errors import LogUnavailable
from adapter.parts import kafka_access
from adapter.protocol.model import StreamMeta
from adapter.state import follower as follower_module
from adapter.state.catalog import Catalog
from adapter.state.follower import MetaFollower
from adapter.state.records import encode
from adapter.state.view_age import ViewAge
from tests.conftest import Client
from topology.internal_records import stream_meta_key
from topology.naming import StateTopics

TEXT = {"Content-Type": "text/plain"}


async def _stream(client: Client, name: str) -> str:
    path = f"/v1/stream/{name}"
    assert (await client.put(path, headers=TEXT)).status == 201
    return path


async def test_long_poll_is_woken_by_an_append(client: Client, unique: str) -> None:
    path = await _stream(client, f"lp-{unique}")
    poll = asyncio.create_task(client.get(path, params={"offset": "now", "live": "long-poll"}))
    await asyncio.sleep(0.3)
    assert not poll.done()
    assert (await client.post(path, data=b"hello", headers=TEXT)).status == 204
    response = await asyncio.wait_for(poll, 5)
    assert response.status == 200
    assert await response.read() == b"hello"
    assert response.headers["Stream-Cursor"].isdigit()


async def test_long_poll_times_out_with_204_and_closure_answers_at_once(
    client: Client, unique: str
) -> None:
    path = await _stream(client, f"lp-timeout-{unique}")
    params = {"offset": "now", "live": "long-poll", "timeout": "1"}
    timed_out = await client.get(path, params=params)
    assert timed_out.status == 204
    assert timed_out.headers["Stream-Up-To-Date"] == "true"
    assert "Stream-Cursor" in timed_out.headers
    assert (await client.post(path, headers={"Stream-Closed": "true"})).status == 204
    loop = asyncio.get_running_loop()
    started = loop.time()
    closed = await client.get(path, params={**params, "timeout": "20"})
    assert closed.status == 204
    assert closed.headers["Stream-Closed"] == "true"
    assert loop.time() - started < 5  # no waiting on a closed stream
    bad = await client.get(path, params={**params, "timeout": "soon"})
    assert bad.status == 400


async def test_one_append_wakes_every_waiter_and_leaves_nothing_behind(
    client: Client, unique: str
) -> None:
    path = await _stream(client, f"fanout-{unique}")
    params = {"offset": "now", "live": "long-poll"}
    # 90: the test client's connection pool holds 100 connections.
    polls = [asyncio.create_task(client.get(path, params=params)) for _ in range(90)]
    hub = client.app[PARTS].hub
    for _ in range(100):
        if hub.waiters == 90:
            break
        await asyncio.sleep(0.05)
    assert (hub.watched, hub.waiters) == (1, 90)
    assert (await client.post(path, data=b"x", headers=TEXT)).status == 204
    responses = await asyncio.wait_for(asyncio.gather(*polls), 20)
    assert [r.status for r in responses] == [200] * 90
    assert {await r.read() for r in responses} == {b"x"}
    assert (hub.watched, hub.waiters) == (0, 0)


async def test_sse_catches_up_tails_and_ends_on_closure(client: Client, unique: str) -> None:
    path = await _stream(client, f"sse-{unique}")
    assert (await client.post(path, data=b"old", headers=TEXT)).status == 204
    response = await client.get(path, params={"offset": "-1", "live": "sse"})
    assert response.headers["Content-Type"] == "text/event-stream"

    async def appender() -> None:
        await asyncio.sleep(0.3)
        await client.post(path, data=b"new", headers=TEXT)
        await client.post(path, data=b"last", headers={**TEXT, "Stream-Closed": "true"})

    task = asyncio.create_task(appender())
    body = (await asyncio.wait_for(response.read(), 20)).decode()  # ends when the server closes
    await task
    events = [block.split("\n") for block in body.strip().split("\n\n")]
    kinds = [lines[0] for lines in events]
    data = [lines[1].removeprefix("data:") for lines in events if lines[0] == "event: data"]
    controls = [
        json.loads(lines[1].removeprefix("data:"))
        for lines in events
        if lines[0] == "event: control"
    ]
    assert "".join(data) == "oldnewlast"
    for i, kind in enumerate(kinds):
        if kind == "event: data":
            assert kinds[i + 1] == "event: control"  # every data event has its control event
    assert controls[-1]["streamClosed"] is True
    assert "streamCursor" not in controls[-1]


async def test_the_follower_reports_each_committed_change(client: Client, unique: str) -> None:
    settings = client.app[SETTINGS]
    topics = StateTopics.of(settings.topic_prefix)
    changed: list[str] = []
    catalog = Catalog()
    follower = MetaFollower(kafka_access(settings), topics, catalog, 10, changed.append)
    path = await _stream(client, f"follow-{unique}")
    await follower.replay()
    assert catalog.stream("_default", f"follow-{unique}") is not None
    following = asyncio.create_task(follower.follow())
    try:
        assert (await client.post(path, data=b"x", headers=TEXT)).status == 204
        for _ in range(100):
            if stream_meta_key("_default", f"follow-{unique}") in changed:
                break
            await asyncio.sleep(0.05)
        assert stream_meta_key("_default", f"follow-{unique}") in changed
    finally:
        following.cancel()
        await asyncio.gather(following, return_exceptions=True)
        await follower.close()


async def test_seen_written_waits_for_a_transaction_the_stable_end_is_still_below(
    client: Client, unique: str
) -> None:
    """Kafka acknowledges a commit before the markers that make its records readable are
    written: for that moment, a stream another instance was answered 201 for sits above the
    meta topic's stable end. `caught_up` (the stable end) returns below a transaction still
    open; `seen_written` (the high watermark) waits for it to end, for as long as it is told,
    and sees its record."""
    name = f"open-{unique}"
    async with _following(client, f"seen-{unique}") as (topics, catalog, follower, producer):
        await asyncio.to_thread(producer.init_transactions, 10)
        producer.begin_transaction()
        meta = StreamMeta("_default", name, 0, "text/plain", 1, 0, 0, 1, 1)
        producer.produce(topics.meta, encode(meta), meta.key)
        await asyncio.to_thread(producer.flush, 10)
        await asyncio.wait_for(follower.caught_up(), 5)  # the stable end is below the record
        with pytest.raises(LogUnavailable):  # the record is written, its transaction open
            await follower.seen_written(0.5)  # a bounded wait: not for as long as it stays open
        seen = asyncio.create_task(follower.seen_written(30))
        await asyncio.sleep(0.5)
        assert not seen.done()
        await asyncio.to_thread(producer.commit_transaction, 10)
        await asyncio.wait_for(seen, 10)
        assert catalog.stream("_default", name) is not None
        producer.begin_transaction()  # leave no stream behind for other tests
        producer.produce(topics.meta, None, meta.key)
        await asyncio.to_thread(producer.commit_transaction, 10)


async def test_a_follower_not_current_for_long_makes_its_consumer_again_and_follows_on(
    client: Client, unique: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A follower that cannot tell it is current for `STALLED_S` (here a transaction
    held open on the meta topic stops it below its record; in the field a consumer librdkafka
    left with no broker) makes its consumer again, and the new one follows on from where the
    old one stopped."""
    monkeypatch.setattr(follower_module, "STALLED_S", 2.0)
    caplog.set_level(logging.WARNING, logger="adapter.state.follower")
    name = f"stalled-{unique}"
    meta = StreamMeta("_default", name, 0, "text/plain", 1, 0, 0, 1, 1)
    async with _following(client, f"stall-{unique}") as (topics, catalog, follower, holder):
        keeping = asyncio.create_task(follower.keep_current(ViewAge(1.0)))
        try:
            await asyncio.to_thread(holder.init_transactions, 10)
            holder.begin_transaction()
            holder.produce(topics.meta, b"", b"held")
            await asyncio.to_thread(holder.flush, 10)
            for _ in range(150):
                if _renewed(caplog):
                    break
                await asyncio.sleep(0.1)
            assert _renewed(caplog)
            await asyncio.to_thread(holder.abort_transaction, 10)
            holder.begin_transaction()
            holder.produce(topics.meta, encode(meta), meta.key)
            await asyncio.to_thread(holder.commit_transaction, 10)
            await asyncio.wait_for(follower.caught_up(), 10)
            assert catalog.stream("_default", name) is not None  # followed by the new consumer
            holder.begin_transaction()  # leave no stream behind for other tests
            holder.produce(topics.meta, None, meta.key)
            await asyncio.to_thread(holder.commit_transaction, 10)
        finally:
            keeping.cancel()
            await asyncio.gather(keeping, return_exceptions=True)


def _renewed(caplog: pytest.LogCaptureFixture) -> bool:
    return any("making its consumers again" in record.getMessage() for record in caplog.records)


@asynccontextmanager
async def _following(
    client: Client, transactional_id: str
) -> AsyncIterator[tuple[StateTopics, Catalog, MetaFollower, Producer]]:
    """A follower of the state topics of `client`'s deployment into a catalog of its own,
    replayed and following, and a transactional producer to write them: (the topics, the
    catalog, the follower, the producer)."""
    settings = client.app[SETTINGS]
    topics = StateTopics.of(settings.topic_prefix)
    catalog = Catalog()
    follower = MetaFollower(kafka_access(settings), topics, catalog, 10, lambda _: None)
    await follower.replay()
    following = asyncio.create_task(follower.follow())
    producer = Producer(
        {"bootstrap.servers": settings.bootstrap_servers, "transactional.id": transactional_id}
    )
    try:
        yield topics, catalog, follower, producer
    finally:
        following.cancel()
        await asyncio.gather(following, return_exceptions=True)
        await follower.close()


async def test_sse_sessions_a_client_hung_up_on_are_freed_at_once(
    client: Client, unique: str
) -> None:
    """Refcounting alone frees a session whose client went away: nothing of it waits for the
    cyclic collector, which the server runs rarely (each such session once held ~6 KiB)."""
    path = await _stream(client, f"sse-gone-{unique}")

    def held() -> int:
        return sum(1 for o in gc.get_objects() if isinstance(o, web.Request) and o.path == path)

    gc.collect()
    gc.disable()
    try:
        for _ in range(10):
            response = await client.get(path, params={"offset": "now", "live": "sse"})
            assert response.status == 200
            await response.content.readline()  # the session has begun
            response.close()  # the client hangs up
        for _ in range(100):  # the handlers see the hang-ups
            if held() == 0:
                break
            await asyncio.sleep(0.1)
        assert held() == 0
    finally:
        gc.enable()
