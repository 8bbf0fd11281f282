"""What the example jobs share: connection arguments and running a query until it is done."""

from __future__ import annotations

import argparse
import json
import signal
import threading
from collections.abc import Mapping
from types import FrameType

from pyspark.sql.streaming.query import StreamingQuery

from topology.client_properties import ClientPropertiesError, checked, read_properties_file
from topology.naming import DEFAULT_PREFIX

BOOTSTRAP_ENV = "KAFKA_BOOTSTRAP_SERVERS"
# The adapter's own: a job reads the cluster with the properties the adapter writes it with.
CLIENT_FILE_ENV = "DURABLE_KAFKA_KAFKA_CLIENT_FILE"
CLIENT_ENV = "DURABLE_KAFKA_KAFKA_CLIENT"


def add_source_arguments(parser: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    """--bootstrap-servers, --kafka-client-file, --topic-prefix, --bucket, --starting-offsets
    and --master."""
    parser.add_argument(
        "--bootstrap-servers",
        default=env.get(BOOTSTRAP_ENV, "127.0.0.1:9092"),
        help=f"Kafka bootstrap servers (default: ${BOOTSTRAP_ENV}, else 127.0.0.1:9092)",
    )
    parser.add_argument(
        "--kafka-client-file",
        default=env.get(CLIENT_FILE_ENV),
        metavar="FILE",
        help=f"the adapter's client.properties (librdkafka keys; default: ${CLIENT_FILE_ENV});"
        f" ${CLIENT_ENV} (a JSON object) is read too and wins",
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


def client_properties(args: argparse.Namespace, env: Mapping[str, str]) -> dict[str, str]:
    """The adapter's Kafka client properties: the file's, then the JSON object's over them."""
    found = read_properties_file(args.kafka_client_file) if args.kafka_client_file else {}
    inline = json.loads(env[CLIENT_ENV]) if env.get(CLIENT_ENV) else {}
    if not isinstance(inline, dict):
        raise ClientPropertiesError(f"${CLIENT_ENV}: expected a JSON object")
    return checked(found | inline, "client properties")


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
