"""A forwarded append whose owner dies after committing it and before answering: the
forwarding instance learns the outcome from the log instead of saying "not written"."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from adapter.log import outcomes
from adapter.log.outcomes import Probe
from adapter.protocol.offsets import encode
from tests.cluster import TEXT, partitions, stream_in, two_instances
from tests.faulty_adapter import fault_env
from tests.kafka_reads import committed_messages
from topology.kafka_client import KafkaAccess
from topology.placement import partition_for
from topology.wire import CONTROL_HEADER, FORWARD_HEADER, header_value

pytestmark = [pytest.mark.integration, pytest.mark.faults]


def _stream_records(bootstrap: str, topic: str, stream: str) -> list[tuple[int, bytes, bytes]]:
    """(offset, value, control event or b"") of the stream's records, as a fresh
    read_committed consumer sees them."""
    prefix = topic.partition("bucket.")[0]  # `{prefix}bucket.{bucket}`
    partition = partition_for(stream.encode(), partitions(prefix))
    found: list[tuple[int, bytes, bytes]] = []
    for message in committed_messages(bootstrap, topic, partition):
        if message.key() == stream.encode():
            event = header_value(message.headers(), CONTROL_HEADER) or b""
            found.append((message.offset() or 0, message.value() or b"", event))
    return found


def _stream_values(bootstrap: str, topic: str, stream: str) -> list[tuple[int, bytes]]:
    """(offset, value) of the stream's data records."""
    return [(o, v) for o, v, event in _stream_records(bootstrap, topic, stream) if not event]


@pytest.mark.timeout(240)
async def test_an_append_committed_by_an_owner_that_then_died_is_answered_written(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    prefix, dying = f"fwd{unique}.", fault_env(crash_after_forwarded_commit=True)
    async with two_instances(kafka_bootstrap, prefix, tmp_path, 120, env_b=dying) as pair:
        session, a, b, owners = pair.session, pair.a, pair.b, pair.owners
        stream = stream_in(prefix, owners[b], "f")
        url = f"{b}/v1/stream/{stream}"
        assert (await session.put(url, headers=TEXT)).status == 201
        async with session.post(url, data="x", headers=TEXT) as reply:
            assert reply.status == 204  # written by the owner itself: nothing dies
        # Through `a`: forwarded to `b`, which commits it and exits before answering.
        async with session.post(f"{a}/v1/stream/{stream}", data="y", headers=TEXT) as reply:
            status, headers = reply.status, reply.headers
            assert status == 204, await reply.text()
        records = _stream_values(kafka_bootstrap, f"{prefix}bucket._default", stream)
        async with session.get(f"{a}/v1/stream/{stream}?offset=-1") as reply:
            assert await reply.read() == b"xy"
        # Answered as the owner would have: with the stream's ETag after the append, which
        # a conditional append may name.
        async with session.head(f"{a}/v1/stream/{stream}") as reply:
            assert reply.headers["ETag"] == headers.get("ETag")
        conditional = TEXT | {"If-Match": headers["ETag"]}
        async with session.post(f"{a}/v1/stream/{stream}", data="z", headers=conditional) as r:
            assert r.status == 204, await r.text()
    assert [value for _offset, value in records] == [b"x", b"y"]  # once, in order
    assert headers["Stream-Next-Offset"] == encode(records[-1][0] + 1)


def _three_forwarded(bootstrap: str, topic: str) -> tuple[AdminClient, Producer]:
    """A one-partition topic and three records of stream `s` produced to it (not yet flushed),
    tagged with forward ids 0…, 1… and 2…."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    producer = Producer({"bootstrap.servers": bootstrap})
    for value, tag in [(b"a", b"0" * 32), (b"b", b"1" * 32), (b"c", b"2" * 32)]:
        producer.produce(topic, value, key=b"s", partition=0, headers=[(FORWARD_HEADER, tag)])
    return admin, producer


def test_a_forward_id_not_in_the_partition_is_answered_not_written(
    kafka_bootstrap: str, unique: str
) -> None:
    topic = f"fwdlog{unique}"
    _, producer = _three_forwarded(kafka_bootstrap, topic)
    producer.produce(topic, b"other", key=b"t", partition=0, headers=[(FORWARD_HEADER, b"9" * 32)])
    assert producer.flush(10) == 0
    where = Probe(topic, 0, 0)
    found = outcomes.forwarded(KafkaAccess(kafka_bootstrap, "t."), where, b"s", "1" * 32, 10)
    assert found == outcomes.Forwarded(written=True, last_data=1, closed=False, tail=2)
    absent = outcomes.Forwarded(written=False, last_data=None, closed=False, tail=3)
    assert (
        outcomes.forwarded(KafkaAccess(kafka_bootstrap, "t."), where, b"s", "9" * 32, 10) == absent
    )  # key t's
    assert (
        outcomes.forwarded(KafkaAccess(kafka_bootstrap, "t."), where, b"s", "f" * 32, 10) == absent
    )
    # Several appends of one stream in one read, each from the tail before it.
    since = {"0" * 32: 0, "1" * 32: 1, "f" * 32: 2}
    found_all = outcomes.forwarded_all(
        KafkaAccess(kafka_bootstrap, "t."), topic, 0, b"s", since, 10
    )
    assert found_all == {
        "0" * 32: outcomes.Forwarded(written=True, last_data=0, closed=False, tail=1),
        "1" * 32: found,
        "f" * 32: absent,
    }


def test_a_forward_id_that_may_be_in_a_freed_range_is_not_answered_not_written(
    kafka_bootstrap: str, unique: str
) -> None:
    """Kafka freed the partition below offset 2 (tiering, a trim or age retention) while the
    owner went silent: an append whose tail before it was below that may have been freed
    with it, so its outcome is unknown; one found above is written; one whose tail before it
    is held and that is not found was not written."""
    topic = f"fwdfreed{unique}"
    admin, producer = _three_forwarded(kafka_bootstrap, topic)
    assert producer.flush(10) == 0
    freed = admin.delete_records([TopicPartition(topic, 0, 2)])
    assert freed[TopicPartition(topic, 0, 2)].result(10).low_watermark == 2
    since = {"0" * 32: 0, "2" * 32: 1, "f" * 32: 1, "e" * 32: 3}
    kafka = KafkaAccess(kafka_bootstrap, "t.")
    found = outcomes.forwarded_all(kafka, topic, 0, b"s", since, 10)
    # An own commit's outcome, learned at one of its records: freed, it is not known either.
    assert outcomes.committed(kafka, Probe(topic, 0, 0), 10) is None
    assert outcomes.committed(kafka, Probe(topic, 0, 2), 10) is True
    assert found == {
        "0" * 32: None,  # at 0, freed: it may have been written
        "2" * 32: outcomes.Forwarded(written=True, last_data=2, closed=False, tail=3),
        "f" * 32: None,  # not found above 2, but [1, 2) is gone
        "e" * 32: outcomes.Forwarded(written=False, last_data=None, closed=False, tail=3),
    }


@pytest.mark.timeout(240)
@pytest.mark.parametrize("method", ["PUT", "DELETE"])
async def test_a_creation_or_deletion_committed_by_an_owner_that_then_died_is_answered_done(
    kafka_bootstrap: str, unique: str, tmp_path: Path, method: str
) -> None:
    prefix, dying = f"fwc{unique}.", fault_env(crash_after_forwarded_commit=True)
    async with two_instances(kafka_bootstrap, prefix, tmp_path, 120, env_b=dying) as pair:
        session, a, b, owners = pair.session, pair.a, pair.b, pair.owners
        stream = stream_in(prefix, owners[b], "c")
        if method == "DELETE":  # created by the owner itself: nothing dies yet
            assert (await session.put(f"{b}/v1/stream/{stream}", headers=TEXT)).status == 201
        # Through `a`: forwarded to `b`, which commits it and exits before answering.
        async with session.request(method, f"{a}/v1/stream/{stream}", headers=TEXT) as reply:
            assert reply.status == (201 if method == "PUT" else 204), await reply.text()
        async with session.head(f"{a}/v1/stream/{stream}") as reply:
            assert reply.status == (200 if method == "PUT" else 404)
    events = _control_events(kafka_bootstrap, f"{prefix}bucket._default", stream)
    assert events == (["create"] if method == "PUT" else ["create", "delete"])  # once each


def _control_events(bootstrap: str, topic: str, stream: str) -> list[str]:
    """The stream's lifecycle events in the log, in order."""
    records = _stream_records(bootstrap, topic, stream)
    return [event.decode() for _offset, _value, event in records if event]
