"""Kafka itself fences a slot's former writer: its transactions fail and nothing is applied;
a slot fenced while the group still gives it to us gets a new writer."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from adapter.cluster.slot_writers import SlotWriters
from adapter.log.errors import LogUnavailable
from adapter.log.writer import LogWriter, Record, WriterLimits
from adapter.tasks import Tasks
from tests.kafka_reads import committed_records, committed_values
from topology.internal_records import owner_key
from topology.kafka_client import KafkaAccess
from topology.naming import writer_transactional_id

pytestmark = pytest.mark.integration

LIMITS = WriterLimits(timeout_s=5, max_message_bytes=1 << 20)


async def _write(writer: LogWriter, topic: str, value: bytes) -> list[int]:
    return await writer.submit([Record(topic, 0, b"k", value)], lambda _offsets: [])


async def test_a_fenced_slot_writer_fails_and_never_fences_back(
    kafka_bootstrap: str, unique: str
) -> None:
    topic = f"fence{unique}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    await asyncio.to_thread(admin.create_topics([NewTopic(topic, 1, 1)])[topic].result, 10)
    old = LogWriter(
        KafkaAccess(kafka_bootstrap, topic), f"{topic}-writer-0", LIMITS, may_reinit=lambda: False
    )
    new = LogWriter(KafkaAccess(kafka_bootstrap, topic), f"{topic}-writer-0", LIMITS)
    tasks = [asyncio.create_task(old.run()), asyncio.create_task(new.run())]
    try:
        await old.start()
        await _write(old, topic, b"before")
        await new.start()  # the slot's new owner: its init fences the old producer
        for _ in range(3):  # the zombie's writes fail, and it never takes the id back
            with pytest.raises(LogUnavailable):
                await _write(old, topic, b"zombie")
            await _write(new, topic, b"after")
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await old.close()
        await new.close()
    values = await asyncio.to_thread(committed_values, kafka_bootstrap, topic)
    assert values == [b"before", b"after", b"after", b"after"]


async def _caught_up() -> None:
    return None


async def _until_written(writers: SlotWriters, topic: str, value: bytes) -> int:
    """Write through slot 0 until it is accepted; how many attempts were refused."""
    for refused in range(100):
        try:
            await writers.submit(0, [Record(topic, 0, b"k", value)], lambda _offsets: [])
        except LogUnavailable:
            await asyncio.sleep(0.1)
            continue
        return refused
    raise AssertionError("slot 0 never took a write again")


@pytest.mark.parametrize("still_ours", [True, False])
async def test_a_slot_fenced_while_still_ours_gets_a_new_writer(
    kafka_bootstrap: str, unique: str, still_ours: bool
) -> None:
    topic, prefix = f"renew{unique}", f"renew{unique}."
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    await asyncio.to_thread(admin.create_topics([NewTopic(topic, 1, 1)])[topic].result, 10)
    writers = SlotWriters(
        KafkaAccess(kafka_bootstrap, prefix),
        1,
        LIMITS,
        _caught_up,
        may_reinit=lambda _slot: still_ours,
        announce=lambda slot: (topic, owner_key(slot), b"owner"),
        tasks=Tasks(),
    )
    intruder = LogWriter(
        KafkaAccess(kafka_bootstrap, prefix), writer_transactional_id(prefix, 0), LIMITS
    )
    generations = []
    try:
        await writers.gain([0])
        generations.append(writers.mark(0))
        await _until_written(writers, topic, b"before")
        await intruder.start()  # fences slot 0's writer while the slot is still assigned
        with pytest.raises(LogUnavailable):  # this transaction finds the writer fenced
            await writers.submit(0, [Record(topic, 0, b"k", b"fenced")], lambda _offsets: [])
        if still_ours:
            assert await _until_written(writers, topic, b"after") > 0
            generations.append(writers.mark(0))
        else:
            with pytest.raises(AssertionError, match="never took a write"):
                await _until_written(writers, topic, b"never")
    finally:
        await writers.close()
        await intruder.close()
    values = await asyncio.to_thread(committed_values, kafka_bootstrap, topic)
    assert values == [b"owner", b"before"] + ([b"owner", b"after"] if still_ours else [])
    # Each writer's generation is the offset of the owner record it committed: a write
    # forwarded under the first is refused by the second (`SlotWriters.mark`).
    records = await asyncio.to_thread(committed_records, kafka_bootstrap, topic)
    assert generations == [offset for offset, value in records if value == b"owner"]
