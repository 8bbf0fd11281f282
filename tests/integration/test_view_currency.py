"""An instance that cannot tell whether it has followed every acknowledged write does not say
`Stream-Up-To-Date`.

A transaction left open on the meta topic and on the stream's partition (as one whose
coordinator stalled after acknowledging it would leave them) holds every instance's meta
follower, and every read_committed read of the partition, below it. The stream's owner still
appends (its own commits update its view); the other instance can learn the new tail neither
from the meta topic nor from the partition. Past `max_view_age_ms`, a catch-up read, a
long-poll, a bootstrap and an SSE session through that instance must not say "up to date" at
the old tail; once the transactions end, it learns the new tail and says so there.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest
from confluent_kafka import Producer

from tests.cluster import TEXT, partitions, stream_in, two_instances
from topology.naming import StateTopics, bucket_topic
from topology.placement import partition_for

pytestmark = pytest.mark.integration

MAX_AGE_MS = 1000


async def _get(session: aiohttp.ClientSession, url: str) -> tuple[int, dict[str, str], str]:
    async with session.get(url) as reply:
        return reply.status, dict(reply.headers), await reply.text()


def _claims(answer: tuple[int, dict[str, str], str], tail: str) -> bool:
    """Whether an answer says it is up to date at a tail short of `tail`."""
    status, headers, _ = answer
    short = headers.get("Stream-Next-Offset", tail) < tail
    return status in (200, 204) and headers.get("Stream-Up-To-Date") == "true" and short


async def _until_up_to_date(session: aiohttp.ClientSession, url: str, tail: str) -> str:
    """The body once a read answers up to date at `tail`."""
    for _ in range(300):
        status, headers, body = await _get(session, url)
        up = status == 200 and headers.get("Stream-Up-To-Date") == "true"
        if up and headers["Stream-Next-Offset"] == tail:
            return body
        await asyncio.sleep(0.1)
    raise AssertionError(f"never up to date at {tail}")


async def _sse(session: aiohttp.ClientSession, url: str) -> str:
    """What an SSE response sends within a few seconds (it ends early, or is left then)."""
    got = b""
    async with session.get(url) as reply:
        try:
            async with asyncio.timeout(3):
                async for piece in reply.content.iter_any():
                    got += piece
        except TimeoutError:
            pass
    return got.decode()


def _hold_meta(bootstrap: str, prefix: str, stream_id: str | None = None) -> Producer:
    """A transaction left open on the meta topic (aborted by the caller), and on the
    partition of `stream_id` of `_default` when given."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"{prefix}test-holder"}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(StateTopics.of(prefix).meta, key=b"held", value=b"")
    if stream_id is not None:
        partition = partition_for(stream_id.encode(), partitions(prefix))
        topic = bucket_topic(prefix, "_default")
        producer.produce(topic, key=b"held", value=b"", partition=partition)
    producer.flush(30)
    return producer


@pytest.mark.timeout(180)
async def test_a_view_that_cannot_be_known_current_is_not_up_to_date(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    prefix = f"vc{unique}."
    env = {"DURABLE_KAFKA_MAX_VIEW_AGE_MS": str(MAX_AGE_MS)}
    async with two_instances(kafka_bootstrap, prefix, tmp_path, env=env) as pair:
        session, a, b = pair.session, pair.a, pair.b
        stream = stream_in(prefix, pair.owners[a], "held")  # written by a
        async with session.put(f"{a}/v1/stream/{stream}", headers=TEXT) as reply:
            assert reply.status == 201, await reply.text()
        async with session.post(f"{a}/v1/stream/{stream}", data="one", headers=TEXT) as reply:
            assert reply.status in (200, 204), await reply.text()
            first_tail = reply.headers["Stream-Next-Offset"]
        read = f"{b}/v1/stream/{stream}?offset=-1"
        assert await _until_up_to_date(session, read, first_tail) == "one"

        holder = _hold_meta(kafka_bootstrap, prefix, stream)
        try:
            async with session.post(f"{a}/v1/stream/{stream}", data="two", headers=TEXT) as r:
                assert r.status in (200, 204), await r.text()
                tail = r.headers["Stream-Next-Offset"]
            await asyncio.sleep(2 * MAX_AGE_MS / 1000)  # b's last measure is older than that
            caught_up = await _get(session, read)
            assert not _claims(caught_up, tail), caught_up
            poll = f"{b}/v1/stream/{stream}?offset={first_tail}&live=long-poll&timeout=1"
            polled = await _get(session, poll)
            assert not _claims(polled, tail), polled
            booted = await _get(session, f"{b}/v1/stream/{stream}/bootstrap")
            assert not _claims(booted, tail), booted
            tailed = await _sse(session, f"{b}/v1/stream/{stream}?offset={first_tail}&live=sse")
            assert '"upToDate":true' not in tailed, tailed
        finally:
            holder.abort_transaction(30)
        assert await _until_up_to_date(session, read, tail) == "onetwo"


@pytest.mark.timeout(180)
async def test_a_read_elsewhere_right_after_an_append_is_up_to_date_only_with_it(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    """Append through the stream's owner, then at once read through the other instance: an
    answer that says up to date (a read, a long-poll at the old tail, a bootstrap) holds it."""
    prefix = f"vn{unique}."
    async with two_instances(kafka_bootstrap, prefix, tmp_path) as pair:
        session, a, b = pair.session, pair.a, pair.b
        stream = stream_in(prefix, pair.owners[a], "now")  # written by a
        async with session.put(f"{a}/v1/stream/{stream}", headers=TEXT) as reply:
            assert reply.status == 201, await reply.text()
        url = f"{b}/v1/stream/{stream}"
        lies = []
        for n in range(30):
            async with session.post(f"{a}/v1/stream/{stream}", data=f"{n},", headers=TEXT) as r:
                assert r.status in (200, 204), await r.text()
                tail = r.headers["Stream-Next-Offset"]
            read = await _get(session, f"{url}?offset=-1")
            before = read[1].get("Stream-Next-Offset", tail)
            polled = await _get(session, f"{url}?offset={before}&live=long-poll&timeout=1")
            booted = await _get(session, f"{url}/bootstrap")
            for kind, answer in (("read", read), ("long-poll", polled), ("bootstrap", booted)):
                if _claims(answer, tail):
                    lies.append((n, kind, answer[1].get("Stream-Next-Offset"), tail))
        assert lies == [], f"up to date without the append just acknowledged: {lies}"
