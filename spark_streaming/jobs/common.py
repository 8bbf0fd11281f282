"""What the example jobs share: connection arguments and running a query until it is done."""

from __future__ import annotations

import argparse
import signal
import threading
from collections.abc import Mapping
from types import FrameType

from pyspark.sql.streaming.query import StreamingQuery

from topology.naming import DEFAULT_PREFIX

BOOTSTRAP_ENV = "KAFKA_BOOTSTRAP_SERVERS"


def add_source_arguments(parser: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    """--bootstrap-servers, --topic-prefix, --bucket, --starting-offsets and --master."""
    parser.add_argument(
        "--bootstrap-servers",
        default=env.get(BOOTSTRAP_ENV, "127.0.0.1:9092"),
        help=f"Kafka bootstrap servers (default: ${BOOTSTRAP_ENV}, else 127.0.0.1:9092)",
    )
    parser.add_argument(
        "--topic-prefix",
        default=DEFAULT_PREFIX,
        help=f"the adapter's topic prefix, DK_TOPIC_PREFIX (default: {DEFAULT_PREFIX})",
    )
    parser.add_argument(
        "--bucket",
        dest="buckets",
        action="append",
        metavar="BUCKET",
        help="read this bucket only; repeat for several (default: every bucket topic)",
    )
    parser.add_argument(
        "--starting-offsets",
        default="earliest",
        help="where a new checkpoint starts: earliest, latest or Spark's JSON form "
        "(default: earliest; ignored once the checkpoint has progress)",
    )
    parser.add_argument(
        "--master",
        default=None,
        help="Spark master URL, e.g. local[2] (default: Spark's own, or spark-submit's)",
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

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not stop.is_set() and not query.awaitTermination(1):
            pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    query.stop()
