"""The cold tier as a batch DataFrame: the chunks the manifest lists, as stream rows.

The tier worker moves data past the hot window out of the bucket topics into Avro container
files (`schemas/tier_message.avsc`), one per stream and tiered range, and records each range
in the compacted topic `{prefix}internal.tier` (`schemas/tier_range.avsc`). Only the chunks a
current range lists are read, so objects of a pass that crashed before its record, or of an
earlier bucket of the same name, never add rows. Rows have the shape and values of
`read_streams_batch` (`schemas/stream_row.avsc`); below Kafka's log start offset, that is
where the rows are, and `read_cold_batch` with `read_streams_batch` is the whole history.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from spark_streaming.client_options import spark_kafka_options
from spark_streaming.schema import row_schema
from topology.internal_records import RecordKind, decode_value, knows_format, meta_kind
from topology.naming import DEFAULT_PREFIX, InternalTopic, bucket_topic, internal_topic

_BUCKET, _TIER = RecordKind.BUCKET_META, RecordKind.TIER_RANGE


def cold_chunk_keys(
    spark: SparkSession,
    bootstrap_servers: str,
    *,
    buckets: Sequence[str] | None = None,
    topic_prefix: str = DEFAULT_PREFIX,
    options: Mapping[str, str] | None = None,
    client_properties: Mapping[str, str] | None = None,
) -> list[str]:
    """The object keys of every chunk of the current buckets' tiered ranges (None: all)."""
    epochs = {
        bucket_topic(topic_prefix, meta["bucket_id"]): meta["created_at_ms"]
        for key, value in _compacted(
            spark, bootstrap_servers, InternalTopic.META, topic_prefix, options, client_properties
        )
        if meta_kind(key) is _BUCKET and value is not None and knows_format(_BUCKET, value)
        for meta in [decode_value(_BUCKET, value, key)]
        if buckets is None or meta["bucket_id"] in buckets
    }
    keys = []
    tier = _compacted(
        spark, bootstrap_servers, InternalTopic.TIER, topic_prefix, options, client_properties
    )
    for key, value in tier:
        if value is None or not knows_format(_TIER, value):
            continue
        tier_range = decode_value(_TIER, value, key)
        if epochs.get(tier_range["topic"]) == tier_range["bucket_created_at_ms"]:
            # An empty key: a chunk the collector dropped (no stream reads it any more).
            keys += [chunk["object_key"] for chunk in tier_range["chunks"] if chunk["object_key"]]
    return sorted(keys)


def read_cold_batch(
    spark: SparkSession,
    bootstrap_servers: str,
    store_root: str,
    *,
    buckets: Sequence[str] | None = None,
    topic_prefix: str = DEFAULT_PREFIX,
    options: Mapping[str, str] | None = None,
    client_properties: Mapping[str, str] | None = None,
) -> DataFrame:
    """Every tiered message of the buckets (None: all), as `read_streams_batch` rows.

    `store_root` is where the adapter's object store keeps its keys, as Spark reads it: the
    `cold_dir` folder (`file:///…`) or `s3a://<s3_bucket>` (with the hadoop-aws connector).
    """
    keys = cold_chunk_keys(
        spark,
        bootstrap_servers,
        buckets=buckets,
        topic_prefix=topic_prefix,
        options=options,
        client_properties=client_properties,
    )
    if not keys:
        return spark.createDataFrame([], row_schema())
    chunks = spark.read.format("avro").load([f"{store_root.rstrip('/')}/{key}" for key in keys])
    media_type = F.lower(F.trim(F.split(F.col("content_type"), ";").getItem(0)))
    columns = {
        "bucket": F.col("bucket_id"),
        "stream_id": F.col("stream_id"),
        "offset": F.col("offset_token"),
        "content_type": F.col("content_type"),
        "payload": F.col("payload"),
        "json": F.when(media_type == "application/json", F.col("payload").cast(StringType())),
        "producer_id": F.col("producer_id"),
        "producer_epoch": F.col("producer_epoch"),
        "producer_seq": F.col("producer_seq"),
        "traceparent": F.lit(None),  # a cold chunk keeps no record headers but the producer's
        "timestamp": F.timestamp_millis(F.col("timestamp_ms")),
        "partition": F.col("partition"),
        "kafka_offset": F.col("offset"),
    }
    return chunks.select(
        *[columns[field.name].cast(field.dataType).alias(field.name) for field in row_schema()]
    )


def _compacted(
    spark: SparkSession,
    bootstrap_servers: str,
    which: InternalTopic,
    topic_prefix: str,
    options: Mapping[str, str] | None,
    client_properties: Mapping[str, str] | None,
) -> list[tuple[str, bytes | None]]:
    """Each key's last value in a (small, compacted) state topic, read on the driver."""
    chosen = {
        **spark_kafka_options(client_properties or {}),
        "groupIdPrefix": f"{topic_prefix}spark",
        "kafka.bootstrap.servers": bootstrap_servers,
        "kafka.isolation.level": "read_committed",
        "subscribe": internal_topic(topic_prefix, which),
        "startingOffsets": "earliest",
        "endingOffsets": "latest",
        **(options or {}),
    }
    rows = spark.read.format("kafka").options(**chosen).load().select("key", "value", "offset")
    last: dict[str, tuple[int, bytes | None]] = {}
    for row in rows.collect():
        key = bytes(row["key"] or b"").decode()
        value = None if row["value"] is None else bytes(row["value"])
        if key not in last or row["offset"] > last[key][0]:
            last[key] = (row["offset"], value)
    return [(key, value) for key, (_, value) in last.items()]
