"""Appends to one stream decided against pending state: order, refusals and chained failure.

Many appends to one stream are sent at once, so that each is decided while the ones before it
are still waiting for their transaction; the stream must hold exactly the acknowledged ones,
once each, in the order they were accepted.
"""

from __future__ import annotations

import asyncio

from confluent_kafka.admin import AdminClient, NewTopic

from adapter.log.errors import LogUnavailable
from adapter.log.writer import LogWriter, Record, WriteBatch, WriterLimits
from tests.conftest import Client
from tests.kafka_reads import committed_values
from topology.kafka_client import KafkaAccess

TEXT = {"Content-Type": "text/plain"}
APPENDS = 120
PRODUCERS = 4
PER_PRODUCER = 40


async def _post(client: Client, url: str, body: str, headers: dict[str, str]) -> int:
    async with client.post(url, data=body.encode(), headers={**TEXT, **headers}) as reply:
        return reply.status


async def _read(client: Client, url: str) -> list[str]:
    async with client.get(url, params={"offset": "-1"}) as reply:
        assert reply.status == 200
        return (await reply.text()).splitlines()


async def _stream(client: Client, name: str) -> str:
    assert (await client.put("/pipe")).status in (200, 201)
    url = f"/pipe/{name}"
    assert (await client.put(url, headers=TEXT)).status == 201
    return url


async def test_concurrent_stream_seq_appends_land_once_in_accepted_order(client: Client) -> None:
    url = await _stream(client, "seq")
    seqs = [f"{i:06d}" for i in range(APPENDS)]
    statuses = await asyncio.gather(
        *(_post(client, url, f"{s}\n", {"Stream-Seq": s}) for s in seqs)
    )
    assert set(statuses) <= {204, 409}
    accepted = [s for s, status in zip(seqs, statuses, strict=True) if status == 204]
    refused = [s for s, status in zip(seqs, statuses, strict=True) if status == 409]
    stored = await _read(client, url)
    assert stored == sorted(accepted)  # each acknowledged once, seqs rising in commit order
    for seq in refused:  # a 409 only where a greater or equal seq was accepted
        assert seq <= stored[-1]
    # Late and repeated seqs are refused against the committed state.
    assert await _post(client, url, "late\n", {"Stream-Seq": seqs[0]}) == 409
    assert await _post(client, url, "next\n", {"Stream-Seq": "999999"}) == 204
    assert await _read(client, url) == [*sorted(accepted), "next"]


async def _produce(client: Client, url: str, pid: str) -> list[tuple[int, int]]:
    """Send every seq at once, then resend whatever was refused, until all are acknowledged."""
    pending = list(range(PER_PRODUCER))
    answers: list[tuple[int, int]] = []
    for _ in range(200):
        if not pending:
            return answers
        statuses = await asyncio.gather(*(_post_producer(client, url, pid, s) for s in pending))
        answers += zip(pending, statuses, strict=True)
        assert set(statuses) <= {200, 204, 409}
        pending = [s for s, status in zip(pending, statuses, strict=True) if status == 409]
    raise AssertionError(f"{pid}: seqs {pending} never acknowledged")


async def _post_producer(client: Client, url: str, pid: str, seq: int) -> int:
    headers = {"Producer-Id": pid, "Producer-Epoch": "0", "Producer-Seq": str(seq)}
    async with client.post(url, data=f"{pid}:{seq}\n", headers={**TEXT, **headers}) as reply:
        if reply.status == 409:  # a gap: the expected seq is one the producer has not had
            assert int(reply.headers["Producer-Expected-Seq"]) <= seq
        return reply.status


async def test_concurrent_producer_appends_land_exactly_once_in_order(client: Client) -> None:
    url = await _stream(client, "producers")
    pids = [f"p{i}" for i in range(PRODUCERS)]
    answers = await asyncio.gather(*(_produce(client, url, pid) for pid in pids))
    stored = await _read(client, url)
    for pid, theirs in zip(pids, answers, strict=True):
        mine = [int(line.split(":")[1]) for line in stored if line.startswith(f"{pid}:")]
        assert mine == list(range(PER_PRODUCER))  # once each, in seq order
        new_data = [seq for seq, status in theirs if status == 200]
        assert sorted(new_data) == list(range(PER_PRODUCER))  # each seq written once
    # A retry of an old seq is a duplicate (204), not new data.
    assert await _post_producer(client, url, "p0", 3) == 204
    assert len(await _read(client, url)) == PRODUCERS * PER_PRODUCER


async def test_a_failed_transaction_fails_every_batch_chained_after_it(
    kafka_bootstrap: str, unique: str
) -> None:
    """Batches B..D were decided against A's pending outcome; A's transaction fails at the
    broker (a record over the topic's limit), so none of them may commit. E, decided on its
    own, commits. (Through HTTP the same failure also needs the slot's ownership to be
    confirmed before a new producer starts; that path is exercised by the fault tests.)"""
    topic = f"chain{unique}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    new = NewTopic(topic, 1, 1, config={"max.message.bytes": "4096"})
    await asyncio.to_thread(admin.create_topics([new])[topic].result, 10)
    writer = LogWriter(KafkaAccess(kafka_bootstrap, topic), f"{topic}-writer-0", LIMITS)
    task = asyncio.create_task(writer.run())
    try:
        await writer.start()
        a = writer.enqueue(_batch(topic, b"a" * 8192, None))
        await asyncio.sleep(0)  # the loop may take A into a transaction of its own, or not
        chain = [a]
        for value in (b"b", b"c", b"d"):
            chain.append(writer.enqueue(_batch(topic, value, chain[-1])))
        alone = writer.enqueue(_batch(topic, b"e", None))
        outcomes = await asyncio.gather(
            *(asyncio.shield(b.future) for b in [*chain, alone]), return_exceptions=True
        )
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await writer.close()
    assert all(isinstance(outcome, LogUnavailable) for outcome in outcomes[:4])
    assert not isinstance(outcomes[4], BaseException)  # E committed (in a later transaction)
    assert await asyncio.to_thread(committed_values, kafka_bootstrap, topic) == [b"e"]


LIMITS = WriterLimits(timeout_s=5, max_message_bytes=1 << 20)


def _batch(topic: str, value: bytes, after: WriteBatch | None) -> WriteBatch:
    return WriteBatch([Record(topic, 0, b"k", value)], lambda _offsets: [], after)
