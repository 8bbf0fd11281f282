"""The cold tier read by Spark: the chunks the manifest lists give, row for row, the rows the
Kafka reader gave for the same offsets before they were tiered and freed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from pyspark.sql import Row, SparkSession

from adapter.app import PARTS, create_app
from spark_streaming import read_cold_batch, read_streams_batch, row_schema
from tests.conftest import ClientFactory, SettingsFactory, wait_ready
from tests.spark.conftest import SPARK_TEST
from topology.naming import bucket_topic

pytestmark = SPARK_TEST


def _rows(frame: list[Row]) -> list[tuple[Any, ...]]:
    return sorted((tuple(row) for row in frame), key=lambda row: (row[1], row[-1]))


def _log_start(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "never-joined"})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), 10, cached=False)[0])
    finally:
        consumer.close()


async def test_the_cold_reader_and_the_kafka_reader_agree_row_for_row(
    spark: SparkSession,
    aiohttp_client: ClientFactory,
    make_settings: SettingsFactory,
    unique: str,
    tmp_path: Path,
) -> None:
    cold_dir = tmp_path / "cold"
    settings = make_settings(
        partitions=1,
        cold_dir=str(cold_dir),
        tier_after_bytes=2048,
        tier_after_ms=0,
        tier_interval_ms=3_600_000,  # the test runs each pass itself, between its reads
    )
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    bucket = f"cold-{unique}"
    assert (await client.put(f"/{bucket}")).status == 201
    json_type = {"Content-Type": "application/json"}
    assert (await client.put(f"/{bucket}/events", headers=json_type)).status == 201
    assert (
        await client.put(f"/{bucket}/notes", headers={"Content-Type": "text/plain"})
    ).status == 201
    for seq in range(30):
        body = json.dumps([{"n": seq, "pad": "x" * 60}, {"m": seq}]).encode()
        producer = {"Producer-Id": "p", "Producer-Epoch": "0", "Producer-Seq": str(seq)}
        posted = await client.post(f"/{bucket}/events", data=body, headers=json_type | producer)
        assert posted.status in (200, 204)
        note = f"note {seq} ".encode() * 8
        posted = await client.post(
            f"/{bucket}/notes", data=note, headers={"Content-Type": "text/plain"}
        )
        assert posted.status == 204
    prefix = settings.topic_prefix
    kafka = settings.bootstrap_servers
    before = _rows(
        read_streams_batch(spark, kafka, buckets=[bucket], topic_prefix=prefix).collect()
    )

    tiering = client.app[PARTS].tiering
    while await tiering.tier_once():
        pass
    topic = bucket_topic(prefix, bucket)
    log_start = _log_start(kafka, topic)
    assert log_start > before[-1][-1] // 2  # most of the data left Kafka

    cold_frame = read_cold_batch(
        spark, kafka, cold_dir.as_uri(), buckets=[bucket], topic_prefix=prefix
    )
    names_and_types = [(field.name, field.dataType) for field in cold_frame.schema]
    assert names_and_types == [(field.name, field.dataType) for field in row_schema()]
    cold = _rows(cold_frame.collect())
    hot = _rows(read_streams_batch(spark, kafka, buckets=[bucket], topic_prefix=prefix).collect())
    assert cold
    assert hot
    assert all(row[-1] < log_start for row in cold)
    assert all(row[-1] >= log_start for row in hot)
    assert _rows([Row(*row) for row in cold + hot]) == before
    assert {row[6] for row in cold if row[1] == "events"} == {"p"}  # producer ids kept
