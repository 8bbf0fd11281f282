"""Kafka itself fences a slot's former writer: its transactions fail and nothing is applied."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from adapter.log.errors import LogUnavailable
from adapter.log.writer import LogWriter, Record, WriterLimits
from tests.kafka_reads import committed_values

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
    old = LogWriter(kafka_bootstrap, f"{topic}-writer-0", LIMITS, may_reinit=lambda: False)
    new = LogWriter(kafka_bootstrap, f"{topic}-writer-0", LIMITS)
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
