"""`durable-kafka acls plan` is enough: a fresh principal granted exactly the printed
`kafka-acls.sh` commands (nothing else; the broker denies all that no ACL allows) does all an
instance does (appends, tiering's DeleteRecords, a mount, bucket deletion), and a Spark reader
granted the plan's reader block reads the bucket and internal topics it needs.

That nothing in the plan is superfluous is shown operation by operation in
tests/integration/test_secure_kafka_acls.py."""

from __future__ import annotations

import secrets
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from adapter.acl_plan import print_acls
from adapter.app import create_app
from devstack.secure_kafka import ADMIN, SecureKafka
from tests.conftest import ClientFactory, SettingsFactory
from tests.deployment import planned_grants
from tests.secure_kafka import (
    existing_topic,
    new_prefix,
    ready_or_why,
    secure_settings,
    walk_through,
)
from topology.naming import InternalTopic, bucket_topic, internal_topic


def _read_all(kafka: SecureKafka, user: str, password: str, topic: str, group: str) -> int:
    """How many records `user` reads from partition 0 of `topic` (an ACL refusal raises)."""
    config = {
        "bootstrap.servers": kafka.sasl_bootstrap,
        **kafka.sasl_properties(user, password),
        "group.id": group,
        "enable.partition.eof": True,
        "enable.auto.commit": False,
    }
    consumer = Consumer(config)
    count = 0
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        while (message := consumer.poll(10)) is not None:
            error = message.error()
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                return count
            assert error is None, f"{user} reading {topic}: {error}"
            count += 1
    finally:
        consumer.close()
    raise AssertionError(f"{user} reading {topic}: no end of partition within 10 s")


def _covered(kafka: SecureKafka, prefix: str, topic: str) -> list[int]:
    """The covered offsets the instance committed for `topic`'s partitions (negative: none),
    read as the super user (`adapter/state/covered_offsets.py`)."""
    config = {
        "bootstrap.servers": kafka.sasl_bootstrap,
        **kafka.sasl_properties(ADMIN),
        "group.id": f"{prefix}covered",
    }
    consumer = Consumer(config)
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        asked = [TopicPartition(topic, partition) for partition in sorted(partitions)]
        return [int(found.offset) for found in consumer.committed(asked, timeout=10)]
    finally:
        consumer.close()


@pytest.mark.timeout(180)
async def test_a_principal_granted_exactly_the_plan_does_everything(
    aiohttp_client: ClientFactory,
    make_settings: SettingsFactory,
    secured_kafka: SecureKafka,
    capsys: pytest.CaptureFixture[str],
) -> None:
    prefix, topic = new_prefix(), f"orders-{new_prefix()}"
    existing_topic(secured_kafka, topic, [b"an order"])
    user, reader = f"plan-{uuid.uuid4().hex[:8]}", f"spark-{uuid.uuid4().hex[:8]}"
    password, reader_password = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
    secured_kafka.set_password(user, password)
    secured_kafka.set_password(reader, reader_password)
    properties = secured_kafka.sasl_properties(user, password)
    settings = secure_settings(make_settings, secured_kafka.sasl_bootstrap, prefix, properties)

    assert print_acls(settings, "kafka-acls", user, reader) == 0
    printed = capsys.readouterr().out
    print(printed)
    for principal, grants in planned_grants(printed).items():
        secured_kafka.grant(principal.removeprefix("User:"), grants)

    def spark_reads(bucket: str) -> None:
        # The slot's checkpoints committed where the bucket's partition is covered.
        assert max(_covered(secured_kafka, prefix, bucket_topic(prefix, bucket))) >= 0
        group = f"{prefix}spark-{uuid.uuid4().hex}"
        assert _read_all(
            secured_kafka, reader, reader_password, bucket_topic(prefix, bucket), group
        )
        for which in (InternalTopic.META, InternalTopic.TIER):
            found = _read_all(
                secured_kafka, reader, reader_password, internal_topic(prefix, which), group
            )
            assert found > 0, which

    client = await aiohttp_client(create_app(settings))
    assert await ready_or_why(client) is None
    walk = await walk_through(client, secured_kafka, prefix, topic, before_delete=spark_reads)
    assert walk.failure is None, walk
    assert walk.steps[-1] == "delete bucket"
