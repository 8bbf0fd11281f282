"""Where the integration tier gets its Kafka broker and S3 server, in order of preference.

1. An address given by the environment (`KAFKA_BOOTSTRAP_SERVERS`, `S3_ENDPOINT_URL`).
2. Containers through testcontainers, when a Docker engine answers.
3. Otherwise the real local services of `devstack`, started fresh for the test run.

The tracing tests' collector is always a local Jaeger of `devstack` (`tracing_collector`).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from devstack import jaeger, kafka, minio
from devstack.process import free_port

# A test's services go with their data, so they are stopped at once (SIGKILL) rather than
# cleanly: a clean stop of the session's broker, holding every test's partitions, took most of
# a minute, and the clean stop is tested where it matters (a broker restarted mid-test).
DISCARD_S = 0.0

KAFKA_IMAGE = "apache/kafka:4.3.1"
MINIO_IMAGE = "minio/minio:RELEASE.2025-09-07T16-13-09Z"


@dataclass(frozen=True)
class S3Server:
    endpoint_url: str
    access_key_id: str
    secret_access_key: str


@functools.cache
def docker_available() -> bool:
    if not os.environ.get("DOCKER_HOST") and not Path("/var/run/docker.sock").exists():
        return False
    import docker

    try:
        client = docker.from_env(timeout=3)
    except Exception:  # noqa: BLE001 - any failure means "no engine here"
        return False
    try:
        return bool(client.ping())
    except Exception:  # noqa: BLE001
        return False
    finally:
        client.close()


@contextlib.contextmanager
def kafka_broker(home: Path) -> Iterator[str]:
    if given := os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        yield given
    elif docker_available():
        from testcontainers.community.kafka import KafkaContainer

        with KafkaContainer(KAFKA_IMAGE).with_kraft() as container:
            yield str(container.get_bootstrap_server())
    else:
        node = kafka.KafkaNode(home=home, port=free_port(), controller_port=free_port())
        try:
            yield kafka.start(node)
        finally:
            kafka.stop(node, DISCARD_S)


@contextlib.contextmanager
def s3_server(home: Path) -> Iterator[S3Server]:
    if given := os.environ.get("S3_ENDPOINT_URL"):
        yield S3Server(
            given,
            os.environ.get("AWS_ACCESS_KEY_ID", minio.ACCESS_KEY),
            os.environ.get("AWS_SECRET_ACCESS_KEY", minio.SECRET_KEY),
        )
    elif docker_available():
        from testcontainers.community.minio import MinioContainer

        with MinioContainer(MINIO_IMAGE) as container:
            config = container.get_config()
            yield S3Server(
                f"http://{config['endpoint']}", config["access_key"], config["secret_key"]
            )
    else:
        node = minio.MinioNode(home=home, port=free_port(), console_port=free_port())
        try:
            yield S3Server(minio.start(node), minio.ACCESS_KEY, minio.SECRET_KEY)
        finally:
            minio.stop(node, DISCARD_S)


@contextlib.contextmanager
def tracing_collector(home: Path) -> Iterator[jaeger.JaegerNode]:
    """A Jaeger with an in-memory store on free ports, for the test session."""
    node = jaeger.JaegerNode(home, free_port(), free_port(), free_port(), free_port())
    try:
        yield jaeger.start(node)
    finally:
        jaeger.stop(node, DISCARD_S)
