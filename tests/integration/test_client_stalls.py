"""Long-lived Kafka clients that have not reached Kafka for long are made again
(`topology/client_stalls.py`): the data partitions' watch that wakes live readers and a mounted
topic's indexer, which go on from where they stopped; the admin client; the mounts' writer.
librdkafka's stall (every broker dropped for good) cannot be forced: each consumer is told it
does not reach Kafka, and the admin client and the producer are given a client of an address
nothing listens on. What is checked is that each is made again, and that the new one works
(the consumers: sees the next record and nothing twice)."""

from __future__ import annotations

import asyncio
import logging
from types import ModuleType

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from adapter.log import mount_indexer, mount_writer, partition_watch
from adapter.log.errors import LogUnavailable
from adapter.log.key_index import KeyIndex
from adapter.log.mount_indexer import MountIndexer, Naming
from adapter.log.mount_writer import MountWriter
from adapter.log.partition_watch import PartitionWatch, Seen
from adapter.parts import kafka_access, topic_layout
from tests.conftest import SettingsFactory
from topology import admin as admin_module
from topology.admin import TopologyAdmin
from topology.errors import BrokerUnavailable
from topology.kafka_client import KafkaAccess
from topology.live_clients import LiveProducer

pytestmark = pytest.mark.integration

NOWHERE = "127.0.0.1:1"  # nothing listens there: a client of it reaches no broker


def _topic(bootstrap: str, name: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(10)
    return name


def _produce(bootstrap: str, topic: str, key: bytes) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, b"v", key)
    assert producer.flush(10) == 0


def _made_again(caplog: pytest.LogCaptureFixture, words: str) -> int:
    return sum(words in record.getMessage() for record in caplog.records)


def _stalls_soon(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    module: ModuleType,
    every: str | None = None,
) -> None:
    """`module`'s client made again after 0.5 s unreached (asked every 0.1 s: `every`)."""
    monkeypatch.setattr(module, "STALLED_S", 0.5)
    if every is not None:
        monkeypatch.setattr(module, every, 0.1)
    caplog.set_level(logging.WARNING, logger=module.__name__)


async def test_a_watch_that_does_not_reach_kafka_for_long_is_made_again_and_goes_on(
    kafka_bootstrap: str,
    unique: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _stalls_soon(monkeypatch, caplog, partition_watch, "PROBE_S")
    reaches = True
    monkeypatch.setattr(PartitionWatch, "_reaches", lambda _self, _consumer: reaches)
    topic = _topic(kafka_bootstrap, f"watch-{unique}")
    watch = PartitionWatch(KafkaAccess(kafka_bootstrap, f"{unique}."), 5.0)

    async def seen_until(key: bytes) -> list[Seen]:
        seen: list[Seen] = []
        for _ in range(100):
            seen += await watch.poll(0.2)
            if any(record[2] == key for record in seen):
                return seen
        raise AssertionError(f"{key!r} not seen: {seen}")

    try:
        await watch.follow({(topic, 0): 0})
        _produce(kafka_bootstrap, topic, b"first")
        assert [s[2:] for s in await seen_until(b"first")] == [(b"first", 0)]
        first = watch._consumer
        reaches = False
        for _ in range(40):
            await watch.poll(0.1)
            if _made_again(caplog, "making its consumer again"):
                break
        assert _made_again(caplog, "the data partitions' watch has not reached Kafka for 0s")
        reaches = True
        _produce(kafka_bootstrap, topic, b"second")
        assert [s[2:] for s in await seen_until(b"second")] == [(b"second", 1)]
        assert watch._consumer is not None
        assert watch._consumer is not first
    finally:
        await watch.close()


async def test_an_indexer_that_does_not_reach_kafka_for_long_is_made_again_and_goes_on(
    kafka_bootstrap: str,
    unique: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _stalls_soon(monkeypatch, caplog, mount_indexer, "PARTITIONS_CHECK_S")
    topic = _topic(kafka_bootstrap, f"mounted-{unique}")
    _produce(kafka_bootstrap, topic, b"first")
    keyed: list[set[str]] = []
    naming = Naming(topic, lambda key: key.decode(), None, lambda _value: None)
    index = KeyIndex(100)
    indexer = MountIndexer(
        KafkaAccess(kafka_bootstrap, f"{unique}."), naming, index, 5.0, keyed.append
    )
    checking = MountIndexer._assign_new_partitions

    def unanswered(self: MountIndexer, consumer: object) -> None:
        raise KafkaException("no broker")  # what a client left without brokers raises

    running = asyncio.create_task(indexer.run())
    try:
        await asyncio.wait_for(indexer.ready.wait(), 30)
        assert keyed == [{"first"}]
        first = indexer._consumer
        monkeypatch.setattr(MountIndexer, "_assign_new_partitions", unanswered)
        for _ in range(40):
            if _made_again(caplog, "made again after"):
                break
            await asyncio.sleep(0.1)
        assert _made_again(caplog, f"indexer of {topic} made again after 0s without reaching")
        monkeypatch.setattr(MountIndexer, "_assign_new_partitions", checking)
        _produce(kafka_bootstrap, topic, b"second")
        for _ in range(100):
            if {"second"} in keyed:
                break
            await asyncio.sleep(0.1)
        assert keyed == [{"first"}, {"second"}]  # the new consumer indexed nothing twice
        assert indexer._consumer is not first
        assert indexer.progress()["scanned"] == 2
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        await indexer.close()


async def test_an_admin_client_that_reaches_no_broker_for_long_is_made_again(
    make_settings: SettingsFactory,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _stalls_soon(monkeypatch, caplog, admin_module)
    settings = make_settings()
    admin = TopologyAdmin(kafka_access(settings), topic_layout(settings), timeout_s=1)
    nowhere = AdminClient({"bootstrap.servers": NOWHERE, "log_level": 0})
    admin._client = nowhere  # type: ignore[assignment]
    for _ in range(2):
        with pytest.raises(BrokerUnavailable):
            await admin.topic_names()
    assert _made_again(caplog, "the admin client has not reached Kafka for 0s: making it again")
    assert await admin.broker_count() == 1


async def test_the_mounts_writer_whose_appends_reach_no_broker_for_long_is_made_again(
    kafka_bootstrap: str,
    unique: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _stalls_soon(monkeypatch, caplog, mount_writer)
    topic = _topic(kafka_bootstrap, f"written-{unique}")
    writer = MountWriter(KafkaAccess(kafka_bootstrap, f"{unique}."), 5.0)
    try:
        assert await writer.produce(topic, b"k", [b"first"]) == [(0, 0)]
        writer._producer = LiveProducer(
            {"bootstrap.servers": NOWHERE, "message.timeout.ms": 500, "log_level": 0}
        )
        for _ in range(2):
            with pytest.raises(LogUnavailable, match="timed out"):
                await writer.produce(topic, b"k", [b"lost"])
        assert _made_again(caplog, "the mounts' writer has not reached Kafka for 0s")
        assert await writer.produce(topic, b"k", [b"second"]) == [(0, 1)]
    finally:
        await writer.close()
