"""The state records a change commits beside its data, for the compacted topics."""

from __future__ import annotations

import time

from adapter.log.writer import StateEntry
from adapter.protocol.model import ProducerRecord, SlotOwner, StreamMeta
from adapter.protocol.producers import ProducerPosition
from adapter.protocol.stream_machine import Write
from adapter.state.catalog import Catalog
from adapter.state.records import encode as encode_state
from topology.internal_records import producer_key, snapshot_key, stream_meta_key
from topology.naming import StateTopics


def stream_entry(topics: StateTopics, meta: StreamMeta) -> StateEntry:
    return (topics.meta, meta.key, encode_state(meta))


def producer_entry(topics: StateTopics, record: ProducerRecord) -> StateEntry:
    return (topics.producers, record.key, encode_state(record))


def write_entries(
    topics: StateTopics, key: tuple[str, str], write: Write, settled: StreamMeta | None
) -> list[StateEntry]:
    """The state records committed with a write: producer states forgotten, the stream's new
    state (or its tombstone and its snapshot pointer's), the tombstones of the sources it
    collects, the producer state it accepted, and the snapshot pointer it publishes."""
    bucket_id, stream_id = key
    entries: list[StateEntry] = [
        (topics.producers, producer_key(bucket_id, stream_id, producer_id), None)
        for producer_id in write.forget
    ]
    if settled is None:
        entries.append((topics.meta, stream_meta_key(bucket_id, stream_id), None))
        entries.append((topics.snapshots, snapshot_key(bucket_id, stream_id), None))
    else:
        entries.append(stream_entry(topics, settled))
    for gone in write.collects:
        entries.append((topics.meta, stream_meta_key(*gone), None))
        entries.append((topics.snapshots, snapshot_key(*gone), None))
    if write.snapshot is not None:
        entries.append((topics.snapshots, write.snapshot.key, encode_state(write.snapshot)))
    record = producer_record(key, write)
    if record is not None:
        entries.append(producer_entry(topics, record))
    return entries


def producer_record(key: tuple[str, str], write: Write) -> ProducerRecord | None:
    """The producer state a write accepted, as stored."""
    if write.producer is None:
        return None
    producer_id, position = write.producer
    return position_record(key, producer_id, position, write.at_ms)


def position_record(
    key: tuple[str, str], producer_id: str, position: ProducerPosition, at_ms: int
) -> ProducerRecord:
    """A producer's position on a stream, as stored."""
    return ProducerRecord(*key, producer_id, position.epoch, position.last_seq, at_ms)


def stream_tombstones(
    catalog: Catalog, topics: StateTopics, bucket_id: str, stream_id: str
) -> list[StateEntry]:
    """Forget a stream: its meta record and every producer state it had."""
    producers = catalog.producers(bucket_id, stream_id).values()
    return [
        (topics.meta, stream_meta_key(bucket_id, stream_id), None),
        *((topics.producers, record.key, None) for record in producers),
    ]


def owner_entry(topics: StateTopics, slot: int, url: str) -> StateEntry:
    """The owners-topic record saying this instance (at `url`) writes `slot` now."""
    record = SlotOwner(slot, url, int(time.time() * 1000))
    return (topics.owners, record.key, encode_state(record))
