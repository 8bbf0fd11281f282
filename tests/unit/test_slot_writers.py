"""Slot writers report a writer loop or a change of ownership that dies, so the process stops."""

from __future__ import annotations

import asyncio

from adapter.cluster.slot_writers import SlotWriters
from adapter.log.writer import StateEntry, WriterLimits
from topology.kafka_client import KafkaAccess


async def _caught_up() -> None:
    return None


def _owner_record(slot: int) -> StateEntry:
    return ("p.internal.owners", str(slot), b"")


def writers_reporting_to(failures: list[BaseException]) -> SlotWriters:
    # Nothing here touches Kafka: producers are made only when a slot is gained.
    return SlotWriters(
        KafkaAccess("127.0.0.1:1", "p."),
        2,
        WriterLimits(1.0, 1 << 20),
        _caught_up,
        bool,
        _owner_record,
        on_failure=failures.append,
    )


async def _ended(name: str, outcome: BaseException | None, cancel: bool = False) -> list[str]:
    failures: list[BaseException] = []
    writers = writers_reporting_to(failures)

    async def body() -> None:
        await asyncio.sleep(0 if not cancel else 10)
        if outcome is not None:
            raise outcome

    task = asyncio.create_task(body(), name=name)
    watch = writers._gain_ended if name.startswith("gain") else writers._writer_ended
    task.add_done_callback(watch)
    if cancel:
        await asyncio.sleep(0)
        task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await asyncio.sleep(0)  # done callbacks run on the next turn of the loop
    return [str(error) for error in failures]


async def test_a_writer_loop_that_raises_is_reported() -> None:
    assert await _ended("writer-0", RuntimeError("bug")) == ["bug"]


async def test_a_writer_loop_that_returns_is_reported_too() -> None:
    assert await _ended("writer-1", None) == ["writer-1 stopped"]


async def test_a_retired_writer_is_not_a_failure() -> None:
    assert await _ended("writer-0", None, cancel=True) == []


async def test_a_change_of_ownership_that_raises_is_reported() -> None:
    assert await _ended("gain-0", RuntimeError("bug")) == ["bug"]
    assert await _ended("gain-1", None) == []
