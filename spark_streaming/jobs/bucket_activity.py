"""Example job: per-stream, per-window activity of the buckets, appended to Parquet.

Each micro-batch of committed messages is aggregated by (bucket, stream, time window) and
written to `OUTPUT/batch_id=N/` (overwritten if Spark re-runs batch N after a failure, so the
output is exactly-once together with the checkpoint). Rows of different batches for the same
stream and window add up; `summarize` does that and counts each bucket's active streams:

    python -m spark_streaming.jobs.bucket_activity --output out --checkpoint ckpt --available-now
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from spark_streaming.jobs.common import add_source_arguments, client_properties, run_until_signalled
from spark_streaming.session import build_session
from spark_streaming.source import read_streams


def parse_args(argv: list[str] | None, env: Mapping[str, str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m spark_streaming.jobs.bucket_activity",
        description="Aggregate the buckets' committed messages per stream and time window "
        "(messages, bytes, JSON messages, first/last offset token and time) into Parquet "
        "under OUTPUT/batch_id=N/, with a checkpoint so a restart resumes where it stopped. "
        "Connector jars: $DURABLE_KAFKA_SPARK_JARS, else the devstack cache.",
    )
    add_source_arguments(parser, env)
    parser.add_argument("--output", required=True, help="Parquet output directory (or URI)")
    parser.add_argument(
        "--checkpoint", required=True, help="checkpoint directory (or URI), one per job"
    )
    parser.add_argument(
        "--window",
        default="1 minute",
        help="tumbling window over the Kafka timestamp (default: '1 minute')",
    )
    parser.add_argument(
        "--available-now",
        action="store_true",
        help="process everything committed so far, then exit (default: run until stopped)",
    )
    parser.add_argument(
        "--interval",
        default="30 seconds",
        help="micro-batch interval when running until stopped (default: '30 seconds')",
    )
    args = parser.parse_args(argv)
    args.client_properties = client_properties(args, env)
    return args


def activity(rows: DataFrame, window: str) -> DataFrame:
    """Per (bucket, stream, window): counts, bytes and the first and last message's position."""
    grouped = rows.groupBy("bucket", "stream_id", F.window("timestamp", window).alias("window"))
    return grouped.agg(
        F.count(F.lit(1)).alias("messages"),
        F.sum(F.length("payload")).cast("long").alias("bytes"),
        F.count("json").alias("json_messages"),
        # Tokens have one width, so text order is offset order (one stream, one partition).
        F.min("offset").alias("first_offset"),
        F.max("offset").alias("last_offset"),
        F.min("timestamp").alias("first_at"),
        F.max("timestamp").alias("last_at"),
    ).select(
        "bucket",
        "stream_id",
        F.col("window.start").alias("window_start"),
        F.col("window.end").alias("window_end"),
        "messages",
        "bytes",
        "json_messages",
        "first_offset",
        "last_offset",
        "first_at",
        "last_at",
    )


def batch_writer(output: str, window: str) -> Callable[[DataFrame, int], None]:
    """foreachBatch: one Parquet directory per batch id, replaced if the batch runs again."""

    def write(batch: DataFrame, batch_id: int) -> None:
        if batch.isEmpty():
            return
        target = f"{output.rstrip('/')}/batch_id={batch_id}"
        activity(batch, window).coalesce(1).write.mode("overwrite").parquet(target)

    return write


def start(spark: SparkSession, args: argparse.Namespace) -> StreamingQuery:
    rows = read_streams(
        spark,
        args.bootstrap_servers,
        buckets=args.buckets,
        topic_prefix=args.topic_prefix,
        starting=args.starting_offsets,
        client_properties=args.client_properties,
    )
    writer = (
        rows.writeStream.queryName("bucket_activity")
        .foreachBatch(batch_writer(args.output, args.window))
        .option("checkpointLocation", args.checkpoint)
    )
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=args.interval)
    return writer.start()


def run(spark: SparkSession, args: argparse.Namespace) -> None:
    """Run the job on a session of the caller's: to the end of the data, or until signalled."""
    query = start(spark, args)
    if args.available_now:
        query.awaitTermination()  # raises if the query failed
    else:
        run_until_signalled(query)


def summarize(spark: SparkSession, output: str) -> DataFrame:
    """Per (bucket, window): totals over every batch, and how many streams were active."""
    written = spark.read.parquet(output)
    return (
        written.groupBy("bucket", "window_start", "window_end")
        .agg(
            F.sum("messages").alias("messages"),
            F.sum("bytes").alias("bytes"),
            F.sum("json_messages").alias("json_messages"),
            F.countDistinct("stream_id").alias("streams"),
            F.min("first_at").alias("first_at"),
            F.max("last_at").alias("last_at"),
        )
        .orderBy("bucket", "window_start")
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv, os.environ)
    spark = build_session("durable-kafka-bucket-activity", master=args.master)
    try:
        run(spark, args)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
