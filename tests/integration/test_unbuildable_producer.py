"""A slot's writer whose next producer librdkafka refuses to build (its certificate files made
unusable by a bad rotation) answers its writes 503 and goes on: once the files are usable again
its next transaction builds a producer and writes."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import NewTopic

from adapter.log.errors import LogUnavailable
from adapter.log.writer import LogWriter, Record, WriterLimits
from devstack.secure_kafka import SecureKafka
from tests.secure_kafka import new_prefix, read_committed, transactions_ready
from topology.acls import instance_grants
from topology.kafka_client import KafkaAccess
from topology.naming import bucket_topic, writer_transactional_id

pytestmark = pytest.mark.integration

LIMITS = WriterLimits(timeout_s=5, max_message_bytes=1 << 20)
WRITE_S = 30.0  # a write's patience: the writer's loop answers well within it while it runs


async def _write(writer: LogWriter, topic: str, partition: int, value: bytes) -> list[int]:
    records = [Record(topic, partition, b"k", value)]
    return await asyncio.wait_for(writer.submit(records, lambda _offsets: []), WRITE_S)


def _prepared(kafka: SecureKafka, topic: str) -> None:
    """The bucket's topic (one partition), created as the super user, and the broker's
    transaction state topic made before the writer needs it (slow on a fresh broker)."""
    admin = kafka.admin()
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
    transactions_ready(kafka)


@pytest.mark.timeout(180)
async def test_a_producer_that_cannot_be_built_fails_the_writes_and_the_writer_goes_on(
    secured_kafka: SecureKafka, tmp_path: Path
) -> None:
    prefix, principal = new_prefix(), f"unbuilt-{uuid.uuid4().hex[:8]}"
    topic = bucket_topic(prefix, "_default")
    issued = secured_kafka.client_certificate(tmp_path, principal)
    secured_kafka.grant(principal, instance_grants(prefix))
    await asyncio.to_thread(_prepared, secured_kafka, topic)
    cert, key = tmp_path / "client.crt", tmp_path / "client.key"
    cert.write_text(issued.cert_pem)
    key.write_text(issued.key_pem)
    properties = secured_kafka.mtls_properties() | {
        "ssl.certificate.location": str(cert),
        "ssl.key.location": str(key),
    }
    writer = LogWriter(
        KafkaAccess(secured_kafka.ssl_bootstrap, prefix, properties),
        writer_transactional_id(prefix, 0),
        LIMITS,
    )
    await asyncio.wait_for(writer.start(), 60)
    loop = asyncio.create_task(writer.run())
    try:
        assert await _write(writer, topic, 0, b"before") == [0]
        cert.write_text("not a certificate\n")  # a rotation gone wrong
        key.write_text("not a key\n")
        # A record the broker refuses (no such partition) fails its transaction, and the
        # writer drops that producer: the next transaction needs a new one.
        with pytest.raises(LogUnavailable):
            await _write(writer, topic, 7, b"refused")
        with pytest.raises(LogUnavailable) as unbuilt:
            await _write(writer, topic, 0, b"unbuilt")
        print(f"\nanswered: {unbuilt.value}")
        assert not loop.done(), loop.exception() if loop.done() else None
        cert.write_text(issued.cert_pem)  # the files put right
        key.write_text(issued.key_pem)
        assert await _write(writer, topic, 0, b"after")
        assert not loop.done()
    finally:
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)
        await writer.close()
    bootstrap = secured_kafka.ssl_bootstrap
    values = await asyncio.to_thread(read_committed, bootstrap, properties, prefix, "_default")
    assert values == [b"before", b"after"]
