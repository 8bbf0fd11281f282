"""The state records a change commits beside its data, for the compacted topics."""

from __future__ import annotations

import time

from adapter.log.writer import StateEntry
from adapter.state.catalog import Catalog
from adapter.state.records import ProducerRecord, SlotOwner, StreamMeta, stream_key
from adapter.state.records import encode as encode_state
from topology.naming import StateTopics


def stream_entry(topics: StateTopics, meta: StreamMeta) -> StateEntry:
    return (topics.meta, meta.key, encode_state(meta))


def producer_entry(topics: StateTopics, record: ProducerRecord) -> StateEntry:
    return (topics.producers, record.key, encode_state(record))


def stream_tombstones(
    catalog: Catalog, topics: StateTopics, bucket_id: str, stream_id: str
) -> list[StateEntry]:
    """Forget a stream: its meta record and every producer state it had."""
    producers = catalog.producers(bucket_id, stream_id).values()
    return [
        (topics.meta, stream_key(bucket_id, stream_id), None),
        *((topics.producers, record.key, None) for record in producers),
    ]


def owner_entry(topics: StateTopics, slot: int, url: str) -> StateEntry:
    """The owners-topic record saying this instance (at `url`) writes `slot` now."""
    record = SlotOwner(slot, url, int(time.time() * 1000))
    return (topics.owners, record.key, encode_state(record))
