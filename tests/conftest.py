"""Session-scoped real services (Kafka, S3) for the integration and conformance tiers."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from adapter.app import create_app
from adapter.config import Settings
from tests.services import S3Server, kafka_broker, s3_server

pytest_plugins = ["tests.served", "tests.secure_kafka"]  # `served_adapter`, `secured_kafka`


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with kafka_broker(tmp_path_factory.mktemp("kafka")) as bootstrap:
        yield bootstrap


@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with s3_server(tmp_path_factory.mktemp("minio")) as server:
        yield server


@pytest.fixture
def unique() -> str:
    """A short random name part, so tests sharing one broker never see each other's topics."""
    return uuid.uuid4().hex[:10]


SettingsFactory = Callable[..., Settings]
Client = TestClient[web.Request, web.Application]
ClientFactory = Callable[[web.Application], Awaitable[Client]]


@pytest.fixture
def make_settings(kafka_bootstrap: str, unique: str, tmp_path: Path) -> SettingsFactory:
    """Settings on the test broker, with a topic prefix of this test's own."""

    def make(**overrides: Any) -> Settings:
        base = Settings(
            bootstrap_servers=kafka_bootstrap,
            topic_prefix=f"t{unique}.",
            partitions=3,
            cold_dir=str(tmp_path / "cold"),
            mount_index_dir=str(tmp_path / "mount-index"),
            catalog_dir=str(tmp_path / "catalog"),
            kafka_timeout_ms=5_000,
        )
        return replace(base, **overrides)

    return make


@pytest.fixture
async def client(aiohttp_client: ClientFactory, make_settings: SettingsFactory) -> Client:
    """An in-process adapter on the test broker, ready to serve streams."""
    test_client = await aiohttp_client(create_app(make_settings()))
    await wait_ready(test_client)
    return test_client


async def wait_ready(test_client: Client) -> None:
    for _ in range(300):
        if (await test_client.get("/readyz")).status == 200:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the adapter never became ready")


TESTS = Path(__file__).resolve().parent
# The tests that share a costly session service run on one worker of `make test` (pytest-xdist,
# `--dist loadgroup`), so it starts once: the Spark session, with the secured broker (a Spark
# test reads from it), and the 3-broker cluster of the fault scenarios.
SPARK_AND_SECURED = "spark-and-secured-kafka"
FAULT_CLUSTER = "fault-cluster"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The Spark tier runs first. Its session's py4j callback server (what `foreachBatch` calls
    back into) waits on its socket with `select()`, which cannot watch a descriptor numbered
    1024 or more: made after the integration tier has opened a thousand descriptors, it dies at
    once and the first `foreachBatch` waits for ever.

    Each test is given its worker group: its file's (so a file's module fixtures start once),
    or the group of the session service it shares."""
    items.sort(key=lambda item: _group(item) != SPARK_AND_SECURED)
    for item in items:
        item.add_marker(pytest.mark.xdist_group(_group(item)))


def _group(item: pytest.Item) -> str:
    if item.path.is_relative_to(TESTS / "spark") or "secured_kafka" in getattr(
        item, "fixturenames", ()
    ):
        return SPARK_AND_SECURED
    if item.path.is_relative_to(TESTS / "faults"):
        return FAULT_CLUSTER
    return str(item.path.relative_to(TESTS))
