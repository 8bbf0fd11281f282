"""Spark's Kafka source on a secured broker: given the adapter's client properties (librdkafka
keys), it reads over SASL_SSL what the adapter wrote, with no grant beyond the adapter's own
documented ACLs (its group ids start with the topic prefix)."""

from __future__ import annotations

import asyncio

from pyspark.sql import SparkSession

from adapter.app import create_app
from devstack.secure_kafka import APP, SecureKafka
from spark_streaming import read_streams_batch
from tests.conftest import ClientFactory, SettingsFactory
from tests.secure_kafka import TEXT, new_prefix, ready_or_why, secure_settings
from tests.spark.conftest import SPARK_TEST
from topology.acls import instance_grants

pytestmark = SPARK_TEST


async def test_read_streams_batch_over_sasl_ssl(
    spark: SparkSession,
    aiohttp_client: ClientFactory,
    make_settings: SettingsFactory,
    secured_kafka: SecureKafka,
) -> None:
    prefix = new_prefix()
    secured_kafka.grant(APP, instance_grants(prefix))
    properties = secured_kafka.sasl_properties()
    settings = secure_settings(
        make_settings, secured_kafka.sasl_bootstrap, prefix, properties, tier_after_bytes=1 << 30
    )
    client = await aiohttp_client(create_app(settings))
    assert await ready_or_why(client) is None
    assert (await client.put("/notes")).status == 201
    assert (await client.put("/notes/n", headers=TEXT)).status == 201
    for body in (b"one", b"two", b"three"):
        assert (await client.post("/notes/n", data=body, headers=TEXT)).status == 204

    frame = read_streams_batch(
        spark,
        secured_kafka.sasl_bootstrap,
        buckets=["notes"],
        topic_prefix=prefix,
        client_properties=properties,
    )
    rows = await asyncio.to_thread(frame.orderBy("kafka_offset").collect)

    assert [bytes(row["payload"]) for row in rows] == [b"one", b"two", b"three"]
    assert {row["stream_id"] for row in rows} == {"n"}
