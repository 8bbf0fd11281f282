"""A slot's checkpoint writes the state of the streams noted since the last one, as the catalog
holds it, in one transaction of the slot's writer: a stream with a write in flight waits for
the next pass, a checkpoint not written keeps its streams noted, and a hand-over takes them
all. Once written, it tells how far each partition it wrote for is covered: past the records
it took, but below the first record of any stream still noted or being checkpointed."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from adapter.log.errors import LogUnavailable
from adapter.protocol.model import BucketMeta, ProducerRecord, StreamMeta
from adapter.service.slot_checkpoints import CheckpointNotes, SlotCheckpoints
from adapter.state.catalog import Catalog
from adapter.state.covered_offsets import Covered, CoveredOffsets, Place
from adapter.state.records import encode
from tests.unit.support.memory_log import TOPICS, Fate, MemoryWriters

NOW = 1_000_000
SLOT = 2


def _stream(stream_id: str, tail: int) -> StreamMeta:
    return StreamMeta("bucket", stream_id, 0, "text/plain", NOW, 0, tail, NOW, NOW)


BORN = 77  # the bucket's creation time: the incarnation its covered offsets name
TOPIC = "t.bucket.bucket"


def _catalog() -> Catalog:
    catalog = Catalog()
    catalog.put_bucket(BucketMeta("bucket", TOPIC, 2, BORN))
    for stream_id, tail in (("a", 5), ("b", 9)):
        catalog.put_stream(_stream(stream_id, tail))
    catalog.put_stream(replace(_stream("c", 4), partition=1))
    catalog.put_producer(ProducerRecord("bucket", "a", "p1", 0, 4, NOW))
    catalog.put_producer(ProducerRecord("bucket", "a", "p2", 1, 0, NOW))
    return catalog


class Marks(CoveredOffsets):
    """What the checkpoints would commit to Kafka, kept in a list."""

    def __init__(self) -> None:
        self.marks: list[dict[Place, Covered]] = []

    def mark_soon(self, covered: dict[Place, Covered]) -> None:
        self.marks.append(covered)


def _checkpoints(busy: set[tuple[str, str]] | None = None) -> tuple[SlotCheckpoints, Catalog]:
    catalog = _catalog()
    notes = CheckpointNotes(catalog, TOPICS)
    held = busy or set()
    checkpoints = SlotCheckpoints(
        notes, MemoryWriters(), 5.0, busy=held.__contains__, covered=Marks()
    )
    return checkpoints, catalog


def _marks(checkpoints: SlotCheckpoints) -> list[dict[Place, Covered]]:
    assert isinstance(checkpoints.covered, Marks)
    return checkpoints.covered.marks


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


async def test_a_checkpoint_written_covers_each_partition_past_the_records_it_took() -> None:
    checkpoints, _catalog = _checkpoints()
    notes = checkpoints.notes
    notes.changed(SLOT, ("bucket", "a"), None, 10, 12)
    notes.changed(SLOT, ("bucket", "b"), "p1", 13, 20)
    notes.changed(SLOT, ("bucket", "a"), None, 21, 21)  # noted again: the span grows
    notes.changed(SLOT, ("bucket", "c"), None, 3, 4)
    assert await _committed(checkpoints) == 3
    assert _marks(checkpoints) == [{(TOPIC, 0): Covered(22, BORN), (TOPIC, 1): Covered(5, BORN)}]


async def test_nothing_is_covered_by_a_checkpoint_not_written() -> None:
    checkpoints, _catalog = _checkpoints()
    checkpoints.notes.changed(SLOT, ("bucket", "a"), None, 10, 12)
    with pytest.raises(LogUnavailable):
        await _committed(checkpoints, Fate.FAIL)
    assert _marks(checkpoints) == []
    checkpoints.notes.changed(SLOT, ("bucket", "b"), None, 13, 14)
    assert await _committed(checkpoints) == 2
    assert _marks(checkpoints) == [{(TOPIC, 0): Covered(15, BORN)}]


async def test_a_stream_left_for_the_next_checkpoint_holds_its_partition_back() -> None:
    checkpoints, _catalog = _checkpoints(busy={("bucket", "b")})
    checkpoints.notes.changed(SLOT, ("bucket", "b"), None, 20, 25)
    checkpoints.notes.changed(SLOT, ("bucket", "a"), None, 10, 30)
    checkpoints.notes.changed(SLOT, ("bucket", "c"), None, 3, 4)
    assert await _committed(checkpoints) == 2
    assert _marks(checkpoints) == [{(TOPIC, 0): Covered(20, BORN), (TOPIC, 1): Covered(5, BORN)}]


def test_a_checkpoint_not_written_yet_holds_the_next_one_back() -> None:
    notes = CheckpointNotes(_catalog(), TOPICS)
    notes.changed(SLOT, ("bucket", "a"), None, 10, 12)
    first = notes.take(SLOT, lambda _key: False)
    notes.changed(SLOT, ("bucket", "b"), None, 13, 14)
    second = notes.take(SLOT, lambda _key: False)
    assert notes.covered(SLOT, second) == {(TOPIC, 0): Covered(10, BORN)}
    notes.written(SLOT, first)
    assert notes.covered(SLOT, second) == {(TOPIC, 0): Covered(15, BORN)}


def test_a_stream_whose_first_unrecorded_record_is_not_known_holds_its_partition_at_zero() -> None:
    notes = CheckpointNotes(_catalog(), TOPICS)
    notes.whole(SLOT, ("bucket", "a"))  # ahead of its records: from where is not known
    notes.changed(SLOT, ("bucket", "b"), None, 13, 14)
    taken = notes.take(SLOT, lambda key: key == ("bucket", "a"))
    assert notes.covered(SLOT, taken) == {(TOPIC, 0): Covered(0, BORN)}
    taken = notes.take(SLOT, lambda _key: False)
    assert notes.covered(SLOT, taken) == {}  # its span is not known: nothing past it is told


def test_a_stream_or_bucket_gone_covers_nothing() -> None:
    catalog = _catalog()
    notes = CheckpointNotes(catalog, TOPICS)
    notes.changed(SLOT, ("bucket", "a"), None, 10, 12)
    notes.changed(SLOT, ("bucket", "gone"), None, 0, 40)
    catalog.drop_stream("bucket", "a")
    assert notes.covered(SLOT, notes.take(SLOT, lambda _key: False)) == {}
