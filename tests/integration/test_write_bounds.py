"""No single request and no flood stops the process: every append is answered, 2xx or 503.

librdkafka refuses a record (`BufferError: Local: Queue full`) once its producer holds
`queue.buffering.max.messages` records, and a transaction holds every record it takes until
the flush. These tests send what used to overflow it and then read the log back with a fresh
`read_committed` consumer: an acknowledged append is there exactly once, a refused one not at
all, and the same process goes on serving.
"""

from __future__ import annotations

import asyncio
from asyncio import FIRST_COMPLETED
from collections import Counter
from collections.abc import AsyncIterator, Coroutine
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from adapter.app import FATAL, SETTINGS, create_app
from adapter.http.body_budget import BODY_BUDGET
from adapter.log.errors import LogUnavailable
from adapter.log.writer import (
    QUEUE_FULL_MESSAGE,
    LogWriter,
    Record,
    StateEntry,
    WriteBatch,
    WriterLimits,
)
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready
from tests.kafka_reads import committed_values
from topology.kafka_client import KafkaAccess

JSON = {"Content-Type": "application/json"}
TEXT = {"Content-Type": "text/plain"}
ELEMENTS = 10_000
ANSWER_WITHIN_S = 90  # far past the documented bound (docs/operations.md): a hang, not a 503


def _array(value: int, count: int) -> bytes:
    return b"[" + b",".join([str(value).encode()] * count) + b"]"


async def _serving(client: Client) -> None:
    """The same process still answers, writes, and has not been told to stop."""
    assert not client.app[FATAL].done(), client.app[FATAL]
    assert (await client.get("/readyz")).status == 200
    assert (await client.put("/after/s", headers=TEXT)).status in (200, 201)
    async with client.post("/after/s", data=b"still here", headers=TEXT) as reply:
        assert reply.status == 204, await reply.text()


async def _answered(client: Client, requests: list[Coroutine[Any, Any, int]]) -> list[int]:
    """Every request's status; fails at once if the process is told to stop meanwhile."""
    answers = asyncio.ensure_future(asyncio.gather(*requests))
    either: list[asyncio.Future[Any]] = [answers, client.app[FATAL]]
    done, _ = await asyncio.wait(either, timeout=ANSWER_WITHIN_S, return_when=FIRST_COMPLETED)
    if answers not in done:
        answers.cancel()
        fatal = client.app[FATAL]
        raise AssertionError(f"not answered: {fatal.result() if fatal.done() else 'a hang'}")
    return answers.result()


async def _client(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, **overrides: int
) -> tuple[Client, str]:
    settings = make_settings(partitions=1, write_slots=1, **overrides)
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    assert (await client.put("/flood")).status == 201
    assert (await client.put("/after")).status == 201
    return client, f"{settings.topic_prefix}bucket.flood"


async def test_a_150000_element_append_is_refused_and_the_process_serves_on(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory
) -> None:
    client, _topic = await _client(aiohttp_client, make_settings)
    assert (await client.put("/flood/big", headers=JSON)).status == 201
    async with client.post("/flood/big", data=_array(0, 150_000), headers=JSON) as reply:
        assert reply.status == 413
        assert (await reply.json())["error"]["code"] == "payload_too_large"
    await _serving(client)


async def _append(client: Client, index: int) -> int:
    body = _array(index, ELEMENTS)
    async with client.post(f"/flood/s{index}", data=body, headers=JSON) as reply:
        if reply.status == 503:
            assert reply.headers["Retry-After"]
            assert (await reply.json())["error"]["code"] == "unavailable"
        return reply.status


@pytest.mark.parametrize("appends", [12, 24])
async def test_concurrent_large_json_appends_to_one_slot_are_answered_and_land_once(
    aiohttp_client: ClientFactory,
    make_settings: SettingsFactory,
    appends: int,
    caplog: pytest.LogCaptureFixture,
) -> None:
    client, topic = await _client(aiohttp_client, make_settings)
    for index in range(appends):
        assert (await client.put(f"/flood/s{index}", headers=JSON)).status == 201
    statuses = await _answered(client, [_append(client, index) for index in range(appends)])
    assert set(statuses) <= {204, 503}, statuses
    assert 204 in statuses
    assert QUEUE_FULL_MESSAGE not in caplog.text  # the caps kept librdkafka's queue from filling
    await _serving(client)
    bootstrap = client.app[SETTINGS].bootstrap_servers
    stored = Counter(await asyncio.to_thread(committed_values, bootstrap, topic))
    for index, status in enumerate(statuses):
        assert stored[str(index).encode()] == (ELEMENTS if status == 204 else 0), (index, status)


async def _held_body(release: asyncio.Event) -> AsyncIterator[bytes]:
    """A chunked body (of unknown size) whose end the test decides."""
    yield b"held "
    await release.wait()
    yield b"body"


async def _post(client: Client, url: str, body: bytes | AsyncIterator[bytes]) -> int:
    async with client.post(url, data=body, headers=TEXT) as reply:
        if reply.status == 503:
            assert reply.headers["Retry-After"]
            assert (await reply.json())["error"]["code"] == "unavailable"
        return reply.status


async def test_bodies_past_the_inflight_limit_are_refused_unread(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory
) -> None:
    """Two chunked bodies reserve the largest body each, filling the budget: every request
    with a body is then refused until one of them is answered; bodyless ones are served."""
    client, _topic = await _client(
        aiohttp_client,
        make_settings,
        max_message_bytes=65_536,
        max_inflight_body_bytes=2 * (65_536 - 16_384),
    )
    assert (await client.put("/flood/s", headers=TEXT)).status == 201
    release = asyncio.Event()
    held = [asyncio.create_task(_post(client, "/flood/s", _held_body(release))) for _ in "ab"]
    budget = client.app[BODY_BUDGET]
    for _ in range(100):  # each reserves the largest body once its headers are read
        if budget.in_flight == budget.limit:
            break
        await asyncio.sleep(0.02)
    assert budget.in_flight == budget.limit
    flood = await _answered(client, [_post(client, "/flood/s", b"x" * 1000) for _ in range(50)])
    assert set(flood) == {503}
    assert (await client.get("/flood/s", params={"offset": "-1"})).status == 200
    release.set()
    assert await asyncio.gather(*held) == [204, 204]
    assert budget.in_flight == 0
    assert await _post(client, "/flood/s", b"x") == 204
    await _serving(client)


def _batch(topic: str, *values: bytes) -> WriteBatch:
    return WriteBatch([Record(topic, 0, b"k", value) for value in values], lambda _offsets: [])


async def test_a_batch_past_its_deadline_is_refused_and_never_written(
    kafka_bootstrap: str, unique: str
) -> None:
    """Batches queued while the loop is busy elsewhere (here: not running) fail at their
    deadline, on time; the loop, once it runs, writes only what came after."""
    topic = f"deadline{unique}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    await asyncio.to_thread(admin.create_topics([NewTopic(topic, 1, 1)])[topic].result, 10)
    writer = LogWriter(
        KafkaAccess(kafka_bootstrap, topic), f"{topic}-writer", WriterLimits(2, 1 << 20)
    )
    await writer.start()
    late = [writer.enqueue(_batch(topic, b"late")) for _ in range(2)]
    outcomes = await asyncio.wait_for(
        asyncio.gather(*(asyncio.shield(b.future) for b in late), return_exceptions=True), 4
    )
    assert all(isinstance(outcome, LogUnavailable) for outcome in outcomes), outcomes
    assert await writer.drain(0.1)  # nothing waits any more
    task = asyncio.create_task(writer.run())
    try:
        await asyncio.wait_for(writer.submit([Record(topic, 0, b"k", b"on time")], _none), 10)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await writer.close()
    assert await asyncio.to_thread(committed_values, kafka_bootstrap, topic) == [b"on time"]


def _none(_offsets: list[int]) -> list[StateEntry]:
    return []


async def test_a_full_slot_queue_refuses_a_batch_at_once() -> None:
    writer = LogWriter(KafkaAccess("127.0.0.1:1", "t."), "never-started", WriterLimits(5, 1 << 20))
    try:
        bound = writer.bounds.queue.records
        first = writer.enqueue(_batch("t", *[b""] * (bound - 10)))
        with pytest.raises(LogUnavailable, match="busy"):
            writer.enqueue(_batch("t", *[b""] * 10))
        writer.enqueue(_batch("t", b"small enough"))  # within the bound: queued
        writer.fail_pending("test over")
        assert first.failed
    finally:
        await writer.close()
