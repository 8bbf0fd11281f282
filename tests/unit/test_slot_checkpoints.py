"""A slot's checkpoint writes the state of the streams noted since the last one, as the catalog
holds it, in one transaction of the slot's writer: a stream with a write in flight waits for
the next pass, a checkpoint not written keeps its streams noted, and a hand-over takes them
all."""

from __future__ import annotations

import asyncio

import pytest

from adapter.log.errors import LogUnavailable
from adapter.protocol.model import ProducerRecord, StreamMeta
from adapter.service.slot_checkpoints import CheckpointNotes, SlotCheckpoints
from adapter.state.catalog import Catalog
from adapter.state.records import encode
from tests.unit.support.memory_log import TOPICS, Fate, MemoryWriters

NOW = 1_000_000
SLOT = 2


def _stream(stream_id: str, tail: int) -> StreamMeta:
    return StreamMeta("bucket", stream_id, 0, "text/plain", NOW, 0, tail, NOW, NOW)


def _catalog() -> Catalog:
    catalog = Catalog()
    for stream_id, tail in (("a", 5), ("b", 9)):
        catalog.put_stream(_stream(stream_id, tail))
    catalog.put_producer(ProducerRecord("bucket", "a", "p1", 0, 4, NOW))
    catalog.put_producer(ProducerRecord("bucket", "a", "p2", 1, 0, NOW))
    return catalog


def _checkpoints(busy: set[tuple[str, str]] | None = None) -> tuple[SlotCheckpoints, Catalog]:
    catalog = _catalog()
    notes = CheckpointNotes(catalog, TOPICS)
    held = busy or set()
    return SlotCheckpoints(notes, MemoryWriters(), 5.0, busy=held.__contains__), catalog


async def _committed(checkpoints: SlotCheckpoints, fate: Fate = Fate.COMMIT) -> int:
    written = asyncio.ensure_future(checkpoints.write(SLOT))
    await asyncio.sleep(0)
    writers = checkpoints.writers
    assert isinstance(writers, MemoryWriters)
    writers.take(10)
    writers.end(fate)
    return await written


async def test_the_noted_streams_and_producers_are_written_as_the_catalog_holds_them() -> None:
    checkpoints, catalog = _checkpoints()
    checkpoints.notes.changed(SLOT, ("bucket", "a"), "p1")
    checkpoints.notes.changed(SLOT, ("bucket", "b"), None)
    checkpoints.notes.changed(SLOT, ("bucket", "a"), "p1")  # noted once, however often
    catalog.put_stream(_stream("a", 7))  # moved since it was noted: the newest is written
    assert await _committed(checkpoints) == 2
    writers = checkpoints.writers
    assert isinstance(writers, MemoryWriters)
    [(batch, _offsets, state)] = writers.commits
    assert batch.records == []  # state records only
    p1 = catalog.producer_states("bucket", "a")["p1"]
    assert state == [
        (TOPICS.meta, _stream("a", 7).key, encode(_stream("a", 7))),
        (TOPICS.producers, p1.key, encode(p1)),
        (TOPICS.meta, _stream("b", 9).key, encode(_stream("b", 9))),
    ]  # p2 was not noted: its record is not written again
    assert (checkpoints.notes.pending(SLOT), await checkpoints.write(SLOT)) == (0, 0)


async def test_a_stream_with_a_write_in_flight_waits_for_the_next_checkpoint() -> None:
    checkpoints, _catalog = _checkpoints(busy={("bucket", "b")})
    checkpoints.notes.changed(SLOT, ("bucket", "a"), None)
    checkpoints.notes.changed(SLOT, ("bucket", "b"), None)
    assert await _committed(checkpoints) == 1
    assert checkpoints.notes.pending(SLOT) == 1


async def test_a_checkpoint_not_written_keeps_its_streams_noted() -> None:
    checkpoints, _catalog = _checkpoints()
    checkpoints.notes.changed(SLOT, ("bucket", "a"), "p2")
    with pytest.raises(LogUnavailable):
        await _committed(checkpoints, Fate.FAIL)
    assert checkpoints.notes.pending(SLOT) == 1
    assert await _committed(checkpoints) == 1


async def test_a_hand_over_takes_every_noted_stream_and_a_stream_gone_has_no_record() -> None:
    checkpoints, catalog = _checkpoints(busy={("bucket", "a")})
    notes = checkpoints.notes
    notes.changed(SLOT, ("bucket", "a"), None)
    notes.changed(SLOT, ("bucket", "b"), None)
    notes.changed(SLOT + 1, ("bucket", "b"), None)
    catalog.drop_stream("bucket", "b")
    assert notes.hand_over(SLOT) == [(TOPICS.meta, _stream("a", 5).key, encode(_stream("a", 5)))]
    assert (notes.pending(SLOT), notes.slots()) == (0, [SLOT + 1])
    notes.forget(("bucket", "b"))
    assert notes.slots() == []
