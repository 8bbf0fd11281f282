"""The writer guesses its partitions' next offsets to send data and metadata in one round trip.

Against the real broker: once a transaction has committed, the next one is guessed and lands
where guessed; a record written into the partition by someone else makes the guess wrong, and
then the transaction is aborted and written again, so the metadata committed always names the
offsets the data really has, and nothing of the aborted attempt is visible.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from adapter.app import PARTS, create_app
from adapter.log.writer import LogWriter, Record, StateEntry, WriterLimits
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready
from tests.kafka_reads import committed_records, committed_values
from topology.kafka_client import KafkaAccess
from topology.naming import bucket_topic

LIMITS = WriterLimits(timeout_s=5, max_message_bytes=1 << 20)
TEXT = {"Content-Type": "text/plain"}


@pytest.fixture
async def topics(kafka_bootstrap: str, unique: str) -> tuple[str, str]:
    data, meta = f"guess{unique}", f"guess{unique}.meta"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    futures = admin.create_topics([NewTopic(data, 1, 1), NewTopic(meta, 1, 1)])
    for future in futures.values():
        await asyncio.to_thread(future.result, 10)
    return data, meta


@pytest.fixture
async def writer(kafka_bootstrap: str, topics: tuple[str, str]) -> AsyncIterator[LogWriter]:
    log_writer = LogWriter(KafkaAccess(kafka_bootstrap, topics[0]), f"{topics[0]}-writer", LIMITS)
    task = asyncio.create_task(log_writer.run())
    await log_writer.start()
    yield log_writer
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await log_writer.close()


async def _write(writer: LogWriter, topics: tuple[str, str], *values: bytes) -> list[int]:
    data, meta = topics

    def finalize(offsets: list[int]) -> list[StateEntry]:
        return [(meta, "tail", f"{offsets[-1] + 1}".encode())]

    records = [Record(data, 0, b"k", value) for value in values]
    return await writer.submit(records, finalize)


def _foreign_write(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, b"foreign", partition=0)
    assert producer.flush(10) == 0


async def test_guessed_offsets_are_checked_and_a_wrong_guess_is_written_again(
    kafka_bootstrap: str, topics: tuple[str, str], writer: LogWriter
) -> None:
    data, meta = topics
    first = await _write(writer, topics, b"a", b"b")  # nothing known yet: two round trips
    assert (writer.guesses.one_round, writer.guesses.missed) == (0, 0)
    second = await _write(writer, topics, b"c")
    assert writer.guesses.one_round == 1
    assert second == [first[-1] + 2]  # past the commit marker

    await asyncio.to_thread(_foreign_write, kafka_bootstrap, data)
    third = await _write(writer, topics, b"d", b"e")
    assert (writer.guesses.one_round, writer.guesses.missed) == (1, 1)
    # Guessed: second + 2 and on; real: past the foreign record and the aborted attempt.
    assert third[0] > second[0] + 3
    fourth = await _write(writer, topics, b"f")  # learnt again from the redone commit
    assert writer.guesses.one_round == 2
    assert fourth == [third[-1] + 2]

    values = await asyncio.to_thread(committed_values, kafka_bootstrap, data)
    assert values == [b"a", b"b", b"c", b"foreign", b"d", b"e", b"f"]  # no aborted copy
    tails = await asyncio.to_thread(committed_values, kafka_bootstrap, meta)
    assert tails == [f"{o[-1] + 1}".encode() for o in (first, second, third, fourth)]
    records = await asyncio.to_thread(committed_records, kafka_bootstrap, data)
    assert [offset for offset, _value in records[-3:]] == [*third, *fourth]


async def test_batches_without_records_commit_in_one_round_trip(
    topics: tuple[str, str], writer: LogWriter, kafka_bootstrap: str
) -> None:
    meta = topics[1]
    await writer.submit([], lambda _offsets: [(meta, "bucket", b"made")])
    assert writer.guesses.one_round == 1
    assert await asyncio.to_thread(committed_values, kafka_bootstrap, meta) == [b"made"]


async def test_pipelined_appends_after_a_wrong_guess_keep_their_offsets(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, kafka_bootstrap: str
) -> None:
    """Through HTTP: appends chained in one transaction are finalized again with the real
    offsets; the stream reads back whole, here and from the catalog another instance builds."""
    settings = make_settings(partitions=1)
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    assert (await client.put("/guesses")).status in (200, 201)
    assert (await client.put("/guesses/s", headers=TEXT)).status == 201
    for i in range(3):  # the writer learns the partition's tail
        assert (await client.post("/guesses/s", data=f"warm{i}\n", headers=TEXT)).status == 204
    topic = bucket_topic(settings.topic_prefix, "guesses")
    await asyncio.to_thread(_foreign_write, kafka_bootstrap, topic)
    bodies = [f"m{i:03d}\n" for i in range(40)]
    replies = await asyncio.gather(
        *(client.post("/guesses/s", data=b, headers=TEXT) for b in bodies)
    )
    assert [reply.status for reply in replies] == [204] * len(bodies)
    guesses = client.app[PARTS].writers.guesses()
    assert guesses.missed == 1  # the foreign record: one transaction aborted and redone
    assert guesses.one_round >= 2  # guessed right before it and after it
    tails = sorted(reply.headers["Stream-Next-Offset"] for reply in replies)  # tokens sort
    expected = [f"warm{i}" for i in range(3)] + [b.strip() for b in bodies]

    async def read_all(reader: Client) -> tuple[list[str], str]:
        async with reader.get("/guesses/s", params={"offset": "-1"}) as reply:
            assert reply.status == 200
            return (await reply.text()).splitlines(), reply.headers["Stream-Next-Offset"]

    lines, tail = await read_all(client)
    assert sorted(lines) == sorted(expected)  # every acknowledged append, once each
    assert len(lines) == len(expected)
    assert tail == tails[-1]
    other = await aiohttp_client(create_app(settings))  # a catalog from the meta topic alone
    await wait_ready(other)
    assert await read_all(other) == (lines, tail)
