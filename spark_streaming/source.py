"""Bucket topics as DataFrames: Spark's own Kafka source, decoded into stream rows.

Every read is `read_committed`: aborted transactions are skipped and open ones are waited for,
so a row exists only for a message the HTTP API acknowledged. A bucket topic also holds the
streams' lifecycle control records (header `dk-control`, empty value); they are never data
rows: `read_streams` drops them and `read_lifecycle` returns them. The record format (header
names, the token's width) comes from `topology.wire`, which needs no Kafka client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType

from spark_streaming.client_options import spark_kafka_options
from spark_streaming.schema import LIFECYCLE_SCHEMA, row_schema
from topology.naming import BUCKET_INFIX, DEFAULT_PREFIX, bucket_topic, bucket_topic_pattern
from topology.wire import (
    CONTENT_TYPE_HEADER,
    CONTROL_HEADER,
    PRODUCER_EPOCH_HEADER,
    PRODUCER_ID_HEADER,
    PRODUCER_SEQ_HEADER,
    TOKEN_GROUP_DIGITS,
    TOKEN_SEPARATOR,
    TRACE_HEADER,
)


def kafka_options(
    bootstrap_servers: str,
    *,
    buckets: Sequence[str] | None = None,
    topic_prefix: str = DEFAULT_PREFIX,
    starting: str = "earliest",
    ending: str | None = None,
    options: Mapping[str, str] | None = None,
    client_properties: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Options of Spark's `kafka` source for the bucket topics: the named buckets, or all.

    `starting`/`ending` are Spark's `startingOffsets`/`endingOffsets`: `earliest`, `latest`
    or its JSON form (per topic and partition). `client_properties` are the adapter's Kafka
    client properties (librdkafka keys, mapped by `spark_kafka_options`). `options` are
    passed on last, so they win (e.g. `maxOffsetsPerTrigger`). The source's consumer group
    ids start with the topic prefix, so the adapter's prefixed Group ACL covers them.
    """
    chosen: dict[str, str] = {
        **spark_kafka_options(client_properties or {}),
        "kafka.bootstrap.servers": bootstrap_servers,
        "kafka.isolation.level": "read_committed",
        "groupIdPrefix": f"{topic_prefix}spark",
        "includeHeaders": "true",
        "startingOffsets": starting,
    }
    if buckets is None:
        chosen["subscribePattern"] = bucket_topic_pattern(topic_prefix)
    else:
        if not buckets:
            raise ValueError("buckets: name at least one bucket, or pass None for all of them")
        chosen["subscribe"] = ",".join(bucket_topic(topic_prefix, bucket) for bucket in buckets)
    if ending is not None:
        chosen["endingOffsets"] = ending
    chosen.update(options or {})
    return chosen


def _header(name: str) -> Column:
    """The first value of a record header, as a string (null when absent)."""
    matching = F.filter("headers", lambda header: header["key"] == F.lit(name))
    return F.get(matching, 0)["value"].cast(StringType())


def offset_token(kafka_offset: Column) -> Column:
    """The HTTP API's token of a Kafka offset (`topology.wire.encode_token`), in SQL.

    Zero-padded to 32 digits as text and split 16/16: exact for every offset, no arithmetic.
    """
    width = TOKEN_GROUP_DIGITS
    digits = F.lpad(kafka_offset.cast(LongType()).cast(StringType()), 2 * width, "0")
    return F.concat(
        F.substring(digits, 1, width), F.lit(TOKEN_SEPARATOR), F.substring(digits, width + 1, width)
    )


def _bucket(topic_prefix: str) -> Column:
    head = topic_prefix + BUCKET_INFIX
    return F.substring(F.col("topic"), len(head) + 1, 1 << 20)


def decode_streams(records: DataFrame, topic_prefix: str = DEFAULT_PREFIX) -> DataFrame:
    """Data rows (schemas/stream_row.avsc) of raw Kafka source rows read with headers."""
    content_type = _header(CONTENT_TYPE_HEADER)
    media_type = F.lower(F.trim(F.split(content_type, ";").getItem(0)))
    columns = {
        "bucket": _bucket(topic_prefix),
        "stream_id": F.col("key").cast(StringType()),
        "offset": offset_token(F.col("offset")),
        "content_type": content_type,
        "payload": F.col("value"),
        "json": F.when(media_type == "application/json", F.col("value").cast(StringType())),
        # Present on the records of appends made with Producer-Id/Epoch/Seq, null otherwise.
        "producer_id": _header(PRODUCER_ID_HEADER),
        "producer_epoch": _header(PRODUCER_EPOCH_HEADER).cast(LongType()),
        "producer_seq": _header(PRODUCER_SEQ_HEADER).cast(LongType()),
        "traceparent": _header(TRACE_HEADER),  # the append's trace, for a job to continue
        "timestamp": F.col("timestamp"),
        "partition": F.col("partition"),
        "kafka_offset": F.col("offset"),
    }
    data = records.where(_header(CONTROL_HEADER).isNull())
    return data.select(
        *[columns[field.name].cast(field.dataType).alias(field.name) for field in row_schema()]
    )


def decode_lifecycle(records: DataFrame, topic_prefix: str = DEFAULT_PREFIX) -> DataFrame:
    """Lifecycle rows (`LIFECYCLE_SCHEMA`) of raw Kafka source rows read with headers."""
    columns = {
        "bucket": _bucket(topic_prefix),
        "stream_id": F.col("key").cast(StringType()),
        "event": _header(CONTROL_HEADER),
        "offset": offset_token(F.col("offset")),
        "timestamp": F.col("timestamp"),
        "partition": F.col("partition"),
        "kafka_offset": F.col("offset"),
    }
    control = records.where(_header(CONTROL_HEADER).isNotNull())
    return control.select(
        *[columns[field.name].cast(field.dataType).alias(field.name) for field in LIFECYCLE_SCHEMA]
    )


def _raw(
    spark: SparkSession,
    bootstrap_servers: str,
    *,
    streaming: bool,
    buckets: Sequence[str] | None,
    topic_prefix: str,
    starting: str,
    ending: str | None,
    options: Mapping[str, str] | None,
    client_properties: Mapping[str, str] | None,
) -> DataFrame:
    chosen = kafka_options(
        bootstrap_servers,
        buckets=buckets,
        topic_prefix=topic_prefix,
        starting=starting,
        ending=ending,
        options=options,
        client_properties=client_properties,
    )
    if streaming:
        return spark.readStream.format("kafka").options(**chosen).load()
    return spark.read.format("kafka").options(**chosen).load()


def read_streams(
    spark: SparkSession,
    bootstrap_servers: str,
    *,
    buckets: Sequence[str] | None = None,
    topic_prefix: str = DEFAULT_PREFIX,
    starting: str = "earliest",
    options: Mapping[str, str] | None = None,
    client_properties: Mapping[str, str] | None = None,
) -> DataFrame:
    """A streaming DataFrame of every committed message of the buckets (None: all buckets)."""
    raw = _raw(
        spark,
        bootstrap_servers,
        streaming=True,
        buckets=buckets,
        topic_prefix=topic_prefix,
        starting=starting,
        ending=None,
        options=options,
        client_properties=client_properties,
    )
    return decode_streams(raw, topic_prefix)


def read_streams_batch(
    spark: SparkSession,
    bootstrap_servers: str,
    *,
    buckets: Sequence[str] | None = None,
    topic_prefix: str = DEFAULT_PREFIX,
    starting: str = "earliest",
    ending: str = "latest",
    options: Mapping[str, str] | None = None,
    client_properties: Mapping[str, str] | None = None,
) -> DataFrame:
    """The same rows as `read_streams`, as a batch DataFrame between two positions."""
    raw = _raw(
        spark,
        bootstrap_servers,
        streaming=False,
        buckets=buckets,
        topic_prefix=topic_prefix,
        starting=starting,
        ending=ending,
        options=options,
        client_properties=client_properties,
    )
    return decode_streams(raw, topic_prefix)


def read_lifecycle(
    spark: SparkSession,
    bootstrap_servers: str,
    *,
    buckets: Sequence[str] | None = None,
    topic_prefix: str = DEFAULT_PREFIX,
    starting: str = "earliest",
    ending: str | None = None,
    streaming: bool = False,
    options: Mapping[str, str] | None = None,
    client_properties: Mapping[str, str] | None = None,
) -> DataFrame:
    """Streams' create/close/delete events: a batch DataFrame, or streaming if asked."""
    raw = _raw(
        spark,
        bootstrap_servers,
        streaming=streaming,
        buckets=buckets,
        topic_prefix=topic_prefix,
        starting=starting,
        ending=None if streaming else (ending or "latest"),
        options=options,
        client_properties=client_properties,
    )
    return decode_lifecycle(raw, topic_prefix)
