"""Streams rebuilt from earlier states of theirs and the committed records after them, read from
the real partition, equal the states the writer left in the catalog: tails, message counts,
closure, Stream-Seq and producer states (times aside: a record's timestamp is taken when it is
produced, a few milliseconds after the append was decided)."""

from __future__ import annotations

from collections import defaultdict

import pytest

from adapter.app import PARTS
from adapter.protocol.model import ProducerRecord
from adapter.protocol.stream_log import StreamState
from adapter.state.catalog import Catalog
from adapter.state.stream_recovery import recover_partition, stream_key
from tests.conftest import Client
from topology.naming import bucket_topic

pytestmark = pytest.mark.integration

TEXT = {"Content-Type": "text/plain"}
JSON = {"Content-Type": "application/json"}
STREAMS = {"plain": TEXT, "json": JSON, "closing": TEXT, "idle": TEXT}


def _producer(seq: int, epoch: int = 0) -> dict[str, str]:
    return {"Producer-Id": "writer-1", "Producer-Epoch": str(epoch), "Producer-Seq": str(seq)}


def _states(catalog: Catalog, bucket: str) -> dict[bytes, StreamState]:
    states = {}
    for name in STREAMS:
        meta = catalog.stream(bucket, name)
        assert meta is not None
        state = StreamState(meta, dict(catalog.producers(bucket, name)))
        states[stream_key(state)] = state
    return states


def _timeless(state: StreamState | None) -> object:
    assert state is not None
    meta = state.meta.evolve(last_write_at_ms=0, last_access_ms=0)
    producers = {
        producer_id: ProducerRecord(r.bucket_id, r.stream_id, r.producer_id, r.epoch, r.last_seq, 0)
        for producer_id, r in state.producers.items()
    }
    return StreamState(meta, producers)


async def _appends(client: Client, bucket: str, round_: int) -> None:
    """Appends of every kind the state learns from: bodies, JSON batches, Stream-Seq, producers
    (a new epoch too), and in the second round a close-only append with a producer."""
    base = f"/{bucket}"
    for index in range(3):
        seq = f"{round_:02d}{index:02d}"
        plain = {**TEXT, "Stream-Seq": seq, **_producer(round_ * 3 + index)}
        assert (await client.post(f"{base}/plain", data=b"x", headers=plain)).status == 200
        batch = {**JSON, **_producer(index, epoch=round_)}
        assert (await client.post(f"{base}/json", data=b"[1, 2, 3]", headers=batch)).status == 200
    if round_ == 0:
        assert (await client.post(f"{base}/closing", data=b"y", headers=TEXT)).status == 204
    else:
        closing = {**_producer(0), "Stream-Seq": "09", "Stream-Closed": "true"}
        assert (await client.post(f"{base}/closing", headers=closing)).status in (200, 204)


async def test_streams_rebuilt_from_earlier_states_and_the_records_after_them(
    client: Client, unique: str
) -> None:
    bucket = f"sr-{unique}"
    assert (await client.put(f"/{bucket}")).status == 201
    for name, headers in STREAMS.items():
        assert (await client.put(f"/{bucket}/{name}", headers=headers)).status == 201
    await _appends(client, bucket, 0)
    parts = client.app[PARTS]
    earlier = _states(parts.catalog, bucket)
    await _appends(client, bucket, 1)
    now = _states(parts.catalog, bucket)
    by_partition: dict[int, dict[bytes, StreamState]] = defaultdict(dict)
    for key, state in earlier.items():
        by_partition[state.meta.partition][key] = state
    topic = bucket_topic(f"t{unique}.", bucket)
    recovered: dict[bytes, StreamState | None] = {}
    for partition, states in by_partition.items():
        recovered |= await recover_partition(parts.scanner, topic, partition, states)
    assert {key: _timeless(state) for key, state in recovered.items()} == {
        key: _timeless(state) for key, state in now.items()
    }
    assert now != earlier  # the scan had news to carry forward
