"""Example job: print every record of every bucket topic to the console as it is committed."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from types import FrameType

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from topology.naming import bucket_topic_pattern

# The newest complete set of connector jars on the registry reachable here (see pyproject).
KAFKA_CONNECTOR = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0"
JARS_ENV = "DURABLE_KAFKA_SPARK_JARS"
BOOTSTRAP_ENV = "KAFKA_BOOTSTRAP_SERVERS"


def parse_args(argv: list[str] | None, env: dict[str, str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m spark_streaming.jobs.console",
        description="Stream every bucket topic's records to the console until stopped.",
    )
    parser.add_argument(
        "--bootstrap-servers",
        default=env.get(BOOTSTRAP_ENV, "127.0.0.1:9092"),
        help=f"Kafka bootstrap servers (default ${BOOTSTRAP_ENV} or 127.0.0.1:9092)",
    )
    parser.add_argument("--topic-prefix", default="durable-kafka.", help="the adapter's prefix")
    parser.add_argument(
        "--starting-offsets", default="earliest", help="earliest, latest or Spark's JSON form"
    )
    return parser.parse_args(argv)


def build_session(jars: str | None) -> SparkSession:
    """A session with the Kafka connector: local jars if given, else fetched by coordinates."""
    builder = SparkSession.builder.appName("durable-kafka-console")
    if jars:
        return builder.config("spark.jars", jars).getOrCreate()
    return builder.config("spark.jars.packages", KAFKA_CONNECTOR).getOrCreate()


def records(
    spark: SparkSession, bootstrap_servers: str, topic_prefix: str, starting_offsets: str
) -> DataFrame:
    """Committed records of every bucket topic, one row each, without the value bytes."""
    source = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribePattern", bucket_topic_pattern(topic_prefix))
        # Writers are transactional: skip aborted batches and wait for open ones.
        .option("kafka.isolation.level", "read_committed")
        .option("startingOffsets", starting_offsets)
        .load()
    )
    return source.select(
        "topic",
        "partition",
        "offset",
        F.col("key").cast("string").alias("key"),
        F.length("value").alias("value_bytes"),
    )


def run_until_signalled(query: StreamingQuery) -> None:
    """Wait for the query; on SIGINT or SIGTERM stop it, then return. A failed query raises.

    PySpark's own SIGINT handler calls into the JVM from inside the handler, on the gateway
    connection the blocked awaitTermination holds, which breaks it. So the handler only sets
    a flag, and short waits let this thread notice it between gateway calls.
    """
    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, request_stop)
    while not stop.is_set() and not query.awaitTermination(1):
        pass
    query.stop()


def main(argv: list[str] | None = None) -> int:
    env = dict(os.environ)
    args = parse_args(argv, env)
    spark = build_session(env.get(JARS_ENV))
    try:
        frame = records(spark, args.bootstrap_servers, args.topic_prefix, args.starting_offsets)
        run_until_signalled(frame.writeStream.format("console").option("truncate", "false").start())
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
