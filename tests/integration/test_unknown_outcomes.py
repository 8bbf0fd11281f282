"""A commit that gets no answer is settled before the request is: 2xx only if it committed.

The writer's test faults lose a commit's request (the transaction is then aborted by the next
producer of the slot) or its reply (the commit happened). Either way the client must get the
real outcome, and the log, read back by a fresh `read_committed` consumer, must hold the
append once or not at all.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from adapter.app import PARTS, create_app
from adapter.log import outcomes
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready
from tests.kafka_reads import committed_records, committed_values

TEXT = {"Content-Type": "text/plain"}


async def _client(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory
) -> tuple[Client, str, str]:
    settings = make_settings(partitions=1, write_slots=1)
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    assert (await client.put("/outcomes")).status == 201
    assert (await client.put("/outcomes/s", headers=TEXT)).status == 201
    topic = f"{settings.topic_prefix}bucket.outcomes"
    return client, topic, settings.bootstrap_servers


def _data(values: list[bytes]) -> list[bytes]:
    return [value for value in values if value]  # control records have empty values


async def test_a_commit_whose_reply_is_lost_is_acknowledged_and_written_once(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory
) -> None:
    client, topic, bootstrap = await _client(aiohttp_client, make_settings)
    faults = client.app[PARTS].writers.faults
    faults.drop_commit_replies = 1
    async with client.post("/outcomes/s", data=b"x", headers=TEXT) as reply:
        assert reply.status == 204, await reply.text()
    assert faults.drop_commit_replies == 0  # the fault did happen
    async with client.post("/outcomes/s", data=b"y", headers=TEXT) as reply:
        assert reply.status == 204  # and the slot writes again
    assert _data(committed_values(bootstrap, topic)) == [b"x", b"y"]
    async with client.get("/outcomes/s", params={"offset": "-1"}) as reply:
        assert await reply.read() == b"xy"


async def test_a_commit_that_never_arrived_is_refused_and_not_written(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory
) -> None:
    client, topic, bootstrap = await _client(aiohttp_client, make_settings)
    faults = client.app[PARTS].writers.faults
    faults.drop_commit_requests = 1
    async with client.post("/outcomes/s", data=b"x", headers=TEXT) as reply:
        assert reply.status == 503
        assert (await reply.json())["error"]["code"] == "unavailable"
    assert faults.drop_commit_requests == 0
    async with client.post("/outcomes/s", data=b"y", headers=TEXT) as reply:
        assert reply.status == 204
    assert _data(committed_values(bootstrap, topic)) == [b"y"]
    async with client.get("/outcomes/s", params={"offset": "-1"}) as reply:
        assert await reply.read() == b"y"


async def test_a_producer_retry_after_a_lost_reply_is_a_duplicate(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory
) -> None:
    client, topic, bootstrap = await _client(aiohttp_client, make_settings)
    client.app[PARTS].writers.faults.drop_commit_replies = 1
    producer = {**TEXT, "Producer-Id": "p", "Producer-Epoch": "0", "Producer-Seq": "0"}
    async with client.post("/outcomes/s", data=b"x", headers=producer) as reply:
        assert reply.status == 200
    async with client.post("/outcomes/s", data=b"x", headers=producer) as reply:
        assert reply.status == 204  # the retry is recognised: the catalog saw the commit
    assert _data(committed_values(bootstrap, topic)) == [b"x"]


async def test_a_commit_answered_unknown_that_happened_reaches_the_catalog(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The slot moves while its writer cannot learn a commit's outcome, and it stays unknown
    past the learning budget: the client gets 504 outcome_unknown (never a 503, which says
    "not written"), the catalog is left as it was. The commit did happen, so when its state
    records come back through the follower they are news, not an echo to skip: reads and the
    next append must see the message (read back from Kafka), not a tail that silently lacks it."""
    client, topic, bootstrap = await _client(aiohttp_client, make_settings)
    parts = client.app[PARTS]
    async with client.post("/outcomes/s", data=b"a", headers=TEXT) as reply:
        assert reply.status == 204
    parts.writers.faults.drop_commit_replies = 1
    monkeypatch.setattr(outcomes, "committed", lambda *_args: None)  # the broker never says
    append = asyncio.create_task(client.post("/outcomes/s", data=b"b", headers=TEXT))
    for _ in range(200):  # until the commit happened; its writer then tries to learn it
        if not parts.writers.faults.drop_commit_replies:
            break
        await asyncio.sleep(0.05)
    await parts.writers.lose([0], drain_s=0)  # the slot moves away mid-learning
    async with await append as reply:
        assert reply.status == 504, await reply.text()
        assert (await reply.json())["error"]["code"] == "outcome_unknown"
    assert _data(committed_values(bootstrap, topic)) == [b"a", b"b"]
    monkeypatch.undo()
    await parts.writers.gain([0])
    tail = committed_records(bootstrap, topic)[-1][0] + 1
    for _ in range(100):  # the follower brings the commit into the catalog
        meta = parts.catalog.stream("outcomes", "s")
        if meta is not None and meta.next_offset >= tail:
            break
        await asyncio.sleep(0.1)
    async with client.get("/outcomes/s", params={"offset": "-1"}) as reply:
        assert await reply.read() == b"ab"
    async with client.post("/outcomes/s", data=b"c", headers=TEXT) as reply:
        assert reply.status == 204
    async with client.get("/outcomes/s", params={"offset": "-1"}) as reply:
        assert await reply.read() == b"abc"
    assert _data(committed_values(bootstrap, topic)) == [b"a", b"b", b"c"]


async def test_a_writer_retired_mid_learning_still_answers_the_real_outcome(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The slot moves while its writer is learning a commit's outcome: learning goes on (the
    next owner's producer ends the transaction) and the client gets the commit's real answer,
    204, not a 5xx for a write that happened."""
    client, topic, bootstrap = await _client(aiohttp_client, make_settings)
    parts = client.app[PARTS]
    async with client.post("/outcomes/s", data=b"a", headers=TEXT) as reply:
        assert reply.status == 204
    retired = asyncio.Event()
    real = outcomes.committed

    def answers_once_retired(*args: Any) -> bool | None:
        return real(*args) if retired.is_set() else None

    parts.writers.faults.drop_commit_replies = 1
    monkeypatch.setattr(outcomes, "committed", answers_once_retired)
    append = asyncio.create_task(client.post("/outcomes/s", data=b"b", headers=TEXT))
    for _ in range(200):  # until the commit happened; its writer then tries to learn it
        if not parts.writers.faults.drop_commit_replies:
            break
        await asyncio.sleep(0.05)
    losing = asyncio.create_task(parts.writers.lose([0], drain_s=0))
    await asyncio.sleep(0.5)
    retired.set()
    await losing
    async with await append as reply:
        assert reply.status == 204, await reply.text()
    assert _data(committed_values(bootstrap, topic)) == [b"a", b"b"]
