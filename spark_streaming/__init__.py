"""Spark Structured Streaming over durable-kafka's bucket topics, with Spark's own Kafka source.

    from spark_streaming import build_session, read_streams
    spark = build_session("my-job")
    rows = read_streams(spark, "127.0.0.1:9092", buckets=["orders"])

Rows follow `schemas/stream_row.avsc` (see `row_schema()`); docs/spark.md has the details.
"""

from spark_streaming.client_options import spark_kafka_options
from spark_streaming.cold import cold_chunk_keys, read_cold_batch
from spark_streaming.history import History, Range, history_of, read_history
from spark_streaming.schema import LIFECYCLE_SCHEMA, row_schema
from spark_streaming.session import JARS_ENV, build_session, connector_jars
from spark_streaming.source import (
    decode_lifecycle,
    decode_streams,
    kafka_options,
    offset_token,
    read_lifecycle,
    read_streams,
    read_streams_batch,
)
from topology.naming import DEFAULT_PREFIX

__all__ = [
    "DEFAULT_PREFIX",
    "JARS_ENV",
    "LIFECYCLE_SCHEMA",
    "History",
    "Range",
    "build_session",
    "cold_chunk_keys",
    "connector_jars",
    "decode_lifecycle",
    "decode_streams",
    "history_of",
    "kafka_options",
    "offset_token",
    "read_cold_batch",
    "read_history",
    "read_lifecycle",
    "read_streams",
    "read_streams_batch",
    "row_schema",
    "spark_kafka_options",
]
