"""Messages appended over HTTP come back from Spark's Kafka source byte for byte, at the
positions the HTTP API names, and nothing else does: no aborted or open transactions, no
lifecycle records, no other bucket."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Producer
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql.types import StructType

from adapter.app import SETTINGS
from adapter.protocol.offsets import encode
from spark_streaming import (
    LIFECYCLE_SCHEMA,
    read_lifecycle,
    read_streams,
    read_streams_batch,
    row_schema,
)
from tests.conftest import Client
from tests.spark.conftest import SPARK_TEST
from topology.naming import bucket_topic
from topology.placement import partition_for
from topology.wire import TRACE_HEADER, data_headers, stream_key

pytestmark = SPARK_TEST

BINARY = "application/octet-stream"
JSON = "application/json"
TEXT = "text/plain"


@dataclass
class Stream:
    """What was appended to one stream over HTTP, and the tails the HTTP API answered."""

    bucket: str
    stream_id: str
    content_type: str
    messages: list[bytes] = field(default_factory=list)
    # (Producer-Id, epoch, seq) each message was appended with, None without them
    producers: list[tuple[str, int, int] | None] = field(default_factory=list)
    # (index of an append's last message, the Stream-Next-Offset the append answered)
    tails: list[tuple[int, str]] = field(default_factory=list)

    @property
    def path(self) -> str:
        return f"/{self.bucket}/{self.stream_id}"


async def append(
    client: Client,
    stream: Stream,
    body: bytes,
    messages: list[bytes],
    closed: bool = False,
    producer: tuple[str, int, int] | None = None,
) -> None:
    headers = {"Content-Type": stream.content_type}
    if closed:
        headers["Stream-Closed"] = "true"
    if producer is not None:
        names = ("Producer-Id", "Producer-Epoch", "Producer-Seq")
        headers |= dict(zip(names, map(str, producer), strict=True))
    if stream.messages or stream.tails:
        response = await client.post(stream.path, data=body, headers=headers)
        assert response.status == (200 if producer else 204), await response.text()
    else:
        response = await client.put(stream.path, data=body, headers=headers)
        assert response.status == 201, await response.text()
    stream.messages.extend(messages)
    stream.producers.extend([producer] * len(messages))
    stream.tails.append((len(stream.messages) - 1, response.headers["Stream-Next-Offset"]))


async def fill(client: Client, bucket: str, other: str) -> list[Stream]:
    """Binary, JSON and a closed text stream in `bucket`; one text stream in `other`."""
    for name in (bucket, other):
        assert (await client.put(f"/{name}")).status == 201
    binary = Stream(bucket, "bin", BINARY)
    await append(client, binary, bytes(range(256)), [bytes(range(256))])
    await append(client, binary, b"\x00\xff\x00", [b"\x00\xff\x00"])
    await append(client, binary, b"\r\n tail \xc3", [b"\r\n tail \xc3"])
    events = Stream(bucket, "events", JSON)
    await append(client, events, b'[{"a":1}, [2,3]]', [b'{"a":1}', b"[2,3]"])
    body = '{"b":"ü"}'.encode()
    await append(client, events, body, [body], producer=("writer-7", 2, 0))
    notes = Stream(bucket, "notes", TEXT)
    await append(client, notes, b"one", [b"one"])
    await append(client, notes, b"two", [b"two"], closed=True)
    elsewhere = Stream(other, "elsewhere", TEXT)
    await append(client, elsewhere, b"not mine", [b"not mine"])
    return [binary, events, notes, elsewhere]


def collect(frame: DataFrame) -> dict[tuple[str, str], list[Row]]:
    """Rows per (bucket, stream), in Kafka offset order."""
    return group(frame.collect())


def group(found: list[Row]) -> dict[tuple[str, str], list[Row]]:
    rows: dict[tuple[str, str], list[Row]] = {}
    for row in sorted(found, key=lambda r: (r["bucket"], r["stream_id"], r["kafka_offset"])):
        rows.setdefault((row["bucket"], row["stream_id"]), []).append(row)
    return rows


def assert_schema(frame: DataFrame, schema: StructType | None = None) -> None:
    """Names, order and types (Spark derives nullability from the expressions)."""
    expected = [(column.name, column.dataType) for column in schema or row_schema()]
    assert [(column.name, column.dataType) for column in frame.schema] == expected


def assert_rows_are_the_streams(
    rows: dict[tuple[str, str], list[Row]], streams: list[Stream]
) -> None:
    assert set(rows) == {(stream.bucket, stream.stream_id) for stream in streams}
    for stream in streams:
        found = rows[(stream.bucket, stream.stream_id)]
        assert [bytes(row["payload"]) for row in found] == stream.messages
        expected_json = [
            m.decode() if stream.content_type == JSON else None for m in stream.messages
        ]
        assert [row["json"] for row in found] == expected_json
        partition = partition_for(stream.stream_id.encode(), PARTITIONS)
        producers = [(r["producer_id"], r["producer_epoch"], r["producer_seq"]) for r in found]
        assert producers == [p or (None, None, None) for p in stream.producers]
        for row in found:
            assert row["traceparent"] is None  # tracing is off
            assert row["content_type"] == stream.content_type
            assert row["offset"] == encode(row["kafka_offset"])
            assert row["partition"] == partition
            assert row["timestamp"] is not None
        # The Stream-Next-Offset an append answered follows its last message's record.
        for last, tail in stream.tails:
            assert encode(found[last]["kafka_offset"] + 1) == tail


async def assert_tokens_read_over_http(client: Client, stream: Stream, rows: list[Row]) -> None:
    """Reading with ?offset=<a row's token> starts at exactly that row's message."""
    for index, row in enumerate(rows):
        response = await client.get(stream.path, params={"offset": row["offset"]})
        assert response.status == 200, await response.text()
        body = await response.read()
        rest = stream.messages[index:]
        if stream.content_type == JSON:
            assert json.loads(body) == [json.loads(message) for message in rest]
        else:
            assert body == b"".join(rest)


def transactional_producer(bootstrap: str, unique: str) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"spark-test-{unique}"}
    )
    producer.init_transactions(30)
    return producer


def produce_in_transaction(producer: Producer, topic: str, stream_id: str, value: bytes) -> None:
    producer.begin_transaction()
    producer.produce(
        topic,
        value,
        key=stream_key(stream_id),
        partition=partition_for(stream_key(stream_id), PARTITIONS),
        headers=data_headers(BINARY),
    )
    assert producer.flush(30) == 0


PARTITIONS = 3  # make_settings' partitions per bucket topic


async def test_batch_reads_exactly_the_acknowledged_messages(
    spark: SparkSession, client: Client, kafka_bootstrap: str, unique: str
) -> None:
    prefix = client.app[SETTINGS].topic_prefix
    bucket, other = f"sa-{unique}", f"sb-{unique}"
    streams = await fill(client, bucket, other)
    mine = [stream for stream in streams if stream.bucket == bucket]
    topic = bucket_topic(prefix, bucket)

    producer = transactional_producer(kafka_bootstrap, unique)
    produce_in_transaction(producer, topic, "bin", b"ABORTED")
    producer.abort_transaction(30)

    frame = read_streams_batch(spark, kafka_bootstrap, buckets=[bucket], topic_prefix=prefix)
    assert_schema(frame)
    rows = collect(frame)
    assert_rows_are_the_streams(rows, mine)
    for stream in mine:
        await assert_tokens_read_over_http(client, stream, rows[(bucket, stream.stream_id)])

    # Every bucket under the prefix, by pattern: the other bucket's stream is there too.
    everything = collect(read_streams_batch(spark, kafka_bootstrap, topic_prefix=prefix))
    assert_rows_are_the_streams(everything, streams)

    # A transaction still open when Spark reads is not read either.
    produce_in_transaction(producer, topic, "bin", b"UNCOMMITTED")
    try:
        again = read_streams_batch(
            spark,
            kafka_bootstrap,
            buckets=[bucket],
            topic_prefix=prefix,
            options={"kafkaConsumer.pollTimeoutMs": "20000"},
        )
        assert collect(again) == rows
    finally:
        producer.abort_transaction(30)


async def test_streaming_reads_the_same_rows_and_resumes_from_its_checkpoint(
    spark: SparkSession, client: Client, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    prefix = client.app[SETTINGS].topic_prefix
    bucket, other = f"sa-{unique}", f"sb-{unique}"
    streams = await fill(client, bucket, other)
    gone = Stream(bucket, "gone", TEXT)
    await append(client, gone, b"bye", [b"bye"])
    assert (await client.delete(gone.path)).status == 204
    mine = [stream for stream in streams if stream.bucket == bucket]

    def drain() -> dict[tuple[str, str], list[Row]]:
        """One availableNow run on the test's checkpoint: the rows of every micro-batch."""
        source = read_streams(spark, kafka_bootstrap, buckets=[bucket], topic_prefix=prefix)
        assert source.isStreaming
        assert_schema(source)
        found: list[Row] = []

        def keep(batch: DataFrame, batch_id: int) -> None:
            found.extend(batch.collect())

        query = (
            source.writeStream.foreachBatch(keep)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        return group(found)

    streamed = drain()
    # A deleted stream's messages stay in Kafka until retention: read_lifecycle tells.
    assert_rows_are_the_streams(streamed, [*mine, gone])
    batch = read_streams_batch(spark, kafka_bootstrap, buckets=[bucket], topic_prefix=prefix)
    assert collect(batch) == streamed

    events = mine[1]
    await append(client, events, b"[true, null]", [b"true", b"null"])
    resumed = drain()
    assert [bytes(row["payload"]) for row in resumed[(bucket, "events")]] == [b"true", b"null"]
    assert set(resumed) == {(bucket, "events")}

    lifecycle = read_lifecycle(spark, kafka_bootstrap, buckets=[bucket], topic_prefix=prefix)
    assert_schema(lifecycle, LIFECYCLE_SCHEMA)
    found = lifecycle.orderBy("kafka_offset").collect()
    assert sorted((row["stream_id"], row["event"]) for row in found) == [
        ("bin", "create"),
        ("events", "create"),
        ("gone", "create"),
        ("gone", "delete"),
        ("notes", "close"),
        ("notes", "create"),
    ]
    data = {**streamed, **resumed}
    for row in found:
        assert row["bucket"] == bucket
        assert row["offset"] == encode(row["kafka_offset"])
        offsets = [r["kafka_offset"] for r in data[(bucket, row["stream_id"])]]
        if row["event"] == "create":
            assert row["kafka_offset"] < min(offsets)
        else:
            assert row["kafka_offset"] > max(offsets)


async def test_a_records_traceparent_header_is_its_rows_column(
    spark: SparkSession, client: Client, kafka_bootstrap: str, unique: str
) -> None:
    """Records as the adapter writes them with tracing on, and one without the header."""
    prefix, bucket = client.app[SETTINGS].topic_prefix, f"st-{unique}"
    assert (await client.put(f"/{bucket}")).status == 201
    trace = f"00-{unique:0>32}-b7ad6b7169203331-01"
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    key = stream_key("traced")
    for value, extra in ((b"traced", [(TRACE_HEADER, trace.encode())]), (b"plain", [])):
        headers = data_headers(TEXT) + extra
        producer.produce(bucket_topic(prefix, bucket), value, key=key, headers=headers)
    assert producer.flush(30) == 0
    frame = read_streams_batch(spark, kafka_bootstrap, buckets=[bucket], topic_prefix=prefix)
    assert_schema(frame)
    rows = collect(frame)[(bucket, "traced")]
    assert [(bytes(row["payload"]), row["traceparent"]) for row in rows] == [
        (b"traced", trace),
        (b"plain", None),
    ]
