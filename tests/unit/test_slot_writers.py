"""Slot writers run their writers and changes of ownership in their task group, whose
`on_failure` stops the process; closing them ends every task they still run."""

from __future__ import annotations

import asyncio

from adapter.cluster.slot_writers import SlotWriters
from adapter.log.writer import StateEntry, WriterLimits
from adapter.tasks import Kind, Tasks
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
        Tasks(failures.append),
    )


async def test_a_change_of_ownership_that_raises_stops_the_process() -> None:
    failures: list[BaseException] = []
    writers = writers_reporting_to(failures)

    async def gain() -> None:
        raise RuntimeError("bug")

    task = writers.tasks.spawn(gain(), "gain-0", Kind.JOB)
    await asyncio.wait([task])
    await asyncio.sleep(0)  # done callbacks run on the next turn of the loop
    assert [str(error) for error in failures] == ["bug"]


async def test_closing_ends_a_change_of_ownership_still_running_without_a_failure() -> None:
    failures: list[BaseException] = []
    writers = writers_reporting_to(failures)
    gain = writers.tasks.spawn(asyncio.sleep(3600), "gain-1", Kind.JOB)  # waits on Kafka
    await asyncio.sleep(0)
    await asyncio.wait_for(writers.close(), 5)
    assert gain.cancelled()
    assert (failures, len(writers.tasks)) == ([], 0)
