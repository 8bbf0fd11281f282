"""A commit that gets no answer is settled before the request is: 2xx only if it committed.

The writer's test faults lose a commit's request (the transaction is then aborted by the next
producer of the slot) or its reply (the commit happened). Either way the client must get the
real outcome, and the log, read back by a fresh `read_committed` consumer, must hold the
append once or not at all.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from confluent_kafka import Message

from adapter.app import PARTS, create_app
from adapter.log import outcomes
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready
from tests.kafka_reads import committed_records, committed_values

TEXT = {"Content-Type": "text/plain"}
real_committed = outcomes.committed


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


def _nothing_followed() -> list[Message]:
    """The meta follower's poll while the broker is away (or its consumer reconnecting)."""
    time.sleep(0.1)
    return []


def _producer(seq: int) -> dict[str, str]:
    return {**TEXT, "Producer-Id": "p", "Producer-Epoch": "0", "Producer-Seq": str(seq)}


async def _sse_data(client: Client, offset: str) -> bytes:
    """Every data event of an SSE session from `offset`, until the stream is closed."""
    async with client.get("/outcomes/s", params={"offset": offset, "live": "sse"}) as reply:
        body = (await asyncio.wait_for(reply.read(), 120)).decode()
    events = [block.split("\n") for block in body.strip().split("\n\n")]
    return "".join(e[1].removeprefix("data:") for e in events if e[0] == "event: data").encode()


async def _until_answered(client: Client, body: bytes, headers: dict[str, str]) -> int:
    """Post until the answer is not 503 (the slot learning an outcome); its status."""
    for _ in range(300):
        async with client.post("/outcomes/s", data=body, headers=headers) as reply:
            if reply.status != 503:
                return reply.status
            assert "Retry-After" in reply.headers
        await asyncio.sleep(0.2)
    raise AssertionError("the slot kept answering 503")


async def test_after_an_unknown_outcome_nothing_is_decided_on_the_stale_state(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit answered 504 that did happen. The broker comes back, and the meta follower
    (reconnecting with its backoff) has not followed the commit's state records yet: while the
    writer learns the outcome the slot decides nothing (503 with Retry-After), so a producer's
    retry is never accepted on the state that lacks the commit; once learned it is a
    duplicate, and the next append extends the hot tail from the real tail. A fresh consumer
    finds each append once, and a live reader waiting since before gets every message once."""
    client, topic, bootstrap = await _client(aiohttp_client, make_settings)
    parts = client.app[PARTS]
    async with client.post("/outcomes/s", data=b"a", headers=_producer(0)) as reply:
        assert reply.status == 200
        after_a = reply.headers["Stream-Next-Offset"]
    live = asyncio.create_task(_sse_data(client, after_a))
    parts.writers.faults.drop_commit_replies = 1
    monkeypatch.setattr(outcomes, "committed", lambda *_args: None)  # the broker never says
    monkeypatch.setattr(parts.follower, "_poll", _nothing_followed)  # nor is it followed
    async with client.post("/outcomes/s", data=b"b", headers=_producer(1)) as reply:
        assert reply.status == 504, await reply.text()
    monkeypatch.setattr(outcomes, "committed", real_committed)  # the broker answers again
    retried = await _until_answered(client, b"b", _producer(1))
    monkeypatch.undo()  # the follower too
    async with client.post("/outcomes/s", data=b"c", headers=_producer(2)) as reply:
        assert reply.status == 200
    async with client.get("/outcomes/s", params={"offset": after_a}) as reply:
        read = await reply.read()
    closing = {**TEXT, "Stream-Closed": "true"}
    assert (await client.post("/outcomes/s", headers=closing)).status == 204
    assert _data(committed_values(bootstrap, topic)) == [b"a", b"b", b"c"]
    assert await live == b"bc"
    assert read == b"bc"  # the hot tail holds the learned commit
    assert retried == 204  # a duplicate


async def test_an_unknown_outcome_learned_aborted_leaves_the_state_as_it_was(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit answered 504 that never arrived: once learned (aborted), the producer's retry
    is accepted and written, once; a live reader gets it once."""
    client, topic, bootstrap = await _client(aiohttp_client, make_settings)
    parts = client.app[PARTS]
    async with client.post("/outcomes/s", data=b"a", headers=_producer(0)) as reply:
        assert reply.status == 200
        after_a = reply.headers["Stream-Next-Offset"]
    live = asyncio.create_task(_sse_data(client, after_a))
    parts.writers.faults.drop_commit_requests = 1
    monkeypatch.setattr(outcomes, "committed", lambda *_args: None)  # the broker never says
    async with client.post("/outcomes/s", data=b"b", headers=_producer(1)) as reply:
        assert reply.status == 504, await reply.text()
    monkeypatch.undo()
    assert await _until_answered(client, b"b", _producer(1)) == 200  # accepted: not written
    closing = {**TEXT, "Stream-Closed": "true"}
    assert (await client.post("/outcomes/s", headers=closing)).status == 204
    assert _data(committed_values(bootstrap, topic)) == [b"a", b"b"]
    assert await live == b"b"


async def test_an_outcome_never_learned_renews_the_slot_and_the_catalog_follows_the_log(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The outcome stays unknown past a second learning budget too: the slot is renewed (a
    new producer ends the transaction, the catalog catches up with the log), and only then
    decides again: the producer's retry is a duplicate, the log holds the append once."""
    client, topic, bootstrap = await _client(aiohttp_client, make_settings)
    parts = client.app[PARTS]
    async with client.post("/outcomes/s", data=b"a", headers=_producer(0)) as reply:
        assert reply.status == 200
    parts.writers.faults.drop_commit_replies = 1
    monkeypatch.setattr(outcomes, "committed", lambda *_args: None)  # never learned
    async with client.post("/outcomes/s", data=b"b", headers=_producer(1)) as reply:
        assert reply.status == 504, await reply.text()
    assert await _until_answered(client, b"b", _producer(1)) == 204  # renewed, a duplicate
    async with client.post("/outcomes/s", data=b"c", headers=_producer(2)) as reply:
        assert reply.status == 200
    async with client.get("/outcomes/s", params={"offset": "-1"}) as reply:
        assert await reply.read() == b"abc"
    assert _data(committed_values(bootstrap, topic)) == [b"a", b"b", b"c"]
