"""The tiering pass's retention floors over a scan of the catalog, a step at a time."""

from __future__ import annotations

import asyncio

from adapter.protocol.model import SnapshotPointer, StreamMeta
from adapter.protocol.snapshots import retention_floors
from adapter.service.tiering import FLOOR_STEP, floors_gently
from tests.unit.test_stream_machine import NOW, _meta, _pointer


def _streams(count: int) -> list[tuple[StreamMeta, SnapshotPointer | None]]:
    streams: list[tuple[StreamMeta, SnapshotPointer | None]] = []
    for n in range(count):
        meta = _meta(stream_id=f"s{n}", partition=n % 3, start_offset=1000 - n, retained_from=2000)
        streams.append((meta, _pointer(meta, 2000) if n % 2 else None))
    return streams


async def test_the_floors_taken_a_step_at_a_time_are_those_of_the_whole_scan() -> None:
    streams = _streams(3 * FLOOR_STEP + 7)
    assert await floors_gently(iter(streams), NOW) == retention_floors(streams, NOW)
    assert await floors_gently(iter([]), NOW) == {}


async def test_other_work_runs_between_the_steps_of_a_scan() -> None:
    """A bucket of 100,000 streams scanned in one go stalled every request for a second or
    more, every pass: the event loop gets a turn after each step."""
    turns = 0
    scanning = True

    async def count() -> None:
        nonlocal turns
        while scanning:
            turns += 1
            await asyncio.sleep(0)

    counter = asyncio.create_task(count())
    await asyncio.sleep(0)
    started = turns
    await floors_gently(iter(_streams(4 * FLOOR_STEP)), NOW)
    scanning = False
    await counter
    assert turns - started >= 4
