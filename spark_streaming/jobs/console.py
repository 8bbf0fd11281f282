"""Example job: print every committed message of the bucket topics to the console."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_streaming.jobs.common import add_source_arguments, client_properties, run_until_signalled
from spark_streaming.session import build_session
from spark_streaming.source import read_streams


def parse_args(argv: list[str] | None, env: Mapping[str, str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m spark_streaming.jobs.console",
        description="Stream every committed message of the bucket topics to the console "
        "until stopped (Ctrl-C). Connector jars: $DURABLE_KAFKA_SPARK_JARS, else the "
        "devstack cache (fetched with Maven on first use).",
    )
    add_source_arguments(parser, env)
    args = parser.parse_args(argv)
    args.client_properties = client_properties(args, env)
    return args


def records(spark: SparkSession, args: argparse.Namespace) -> DataFrame:
    """One line per message: where it is, and its size rather than its bytes."""
    rows = read_streams(
        spark,
        args.bootstrap_servers,
        buckets=args.buckets,
        topic_prefix=args.topic_prefix,
        starting=args.starting_offsets,
        client_properties=args.client_properties,
    )
    return rows.select(
        "bucket",
        "stream_id",
        "offset",
        "content_type",
        F.length("payload").alias("bytes"),
        "timestamp",
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv, os.environ)
    spark = build_session("durable-kafka-console", master=args.master)
    try:
        frame = records(spark, args)
        run_until_signalled(frame.writeStream.format("console").option("truncate", "false").start())
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
