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
from adapter.state.format_gate import GATE
from devstack.jaeger import JaegerNode
from tests.services import S3Server, kafka_broker, s3_server, tracing_collector

pytest_plugins = ["tests.served", "tests.secure_kafka"]  # `served_adapter`, `secured_kafka`


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with kafka_broker(tmp_path_factory.mktemp("kafka")) as bootstrap:
        yield bootstrap


@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with s3_server(tmp_path_factory.mktemp("minio")) as server:
        yield server


@pytest.fixture(scope="session")
def jaeger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JaegerNode]:
    """A real trace collector (Jaeger, memory store), started only by the tests that ask."""
    with tracing_collector(tmp_path_factory.mktemp("jaeger")) as node:
        yield node


@pytest.fixture(autouse=True)
def _format_gate_kept() -> Iterator[None]:
    """The process's format gate (`adapter/state/format_gate.py`) as it was before each test:
    a catalog a test applies records to raises the level the gate knows, and an in-process
    adapter started later in the same worker would then take that for its deployment's."""
    saved = dict(vars(GATE))
    yield
    vars(GATE).update(saved)


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


async def wait_ready(test_client: Client, timeout_s: float = 60.0) -> None:
    """Until `/readyz` answers 200: a fresh broker on a loaded machine takes tens of seconds to
    make its group and transaction coordinators ready (the session's first test waits for it)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while (await test_client.get("/readyz")).status != 200:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("the adapter never became ready")
        await asyncio.sleep(0.05)


# On the test processes of `make test` (pytest-xdist) each test file runs whole on one, so its
# module fixtures start once and its heavy tests never run beside each other; the Spark tier and
# the fault scenarios' 3-broker cluster are one group each, so their session service starts once.
SPARK = "tests/spark"
FAULT_CLUSTER = "tests/faults"
FIRST = (SPARK, FAULT_CLUSTER)


def group(nodeid: str) -> str:
    """The group of a test, from its node id alone: the scheduler sees nothing else."""
    path = nodeid.split("::", 1)[0]
    return next((tier for tier in FIRST if path.startswith(f"{tier}/")), path)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The Spark tier runs first. Its session's py4j callback server (what `foreachBatch` calls
    back into) waits on its socket with `select()`, which cannot watch a descriptor numbered
    1024 or more: made after the integration tier has opened a thousand descriptors, it dies at
    once and the first `foreachBatch` waits for ever. The fault scenarios come next, so that
    with two processes the longest group starts at once on the other one."""
    items.sort(key=lambda item: _rank(group(item.nodeid)))


def _rank(name: str) -> int:
    return FIRST.index(name) if name in FIRST else len(FIRST)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Whole groups to a process, in the order collected. pytest-xdist's own `loadgroup` reads
    `xdist_group` marks into node ids in a way pytest 9 ignores, so it would spread a group's
    tests over every process."""
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return group(nodeid)

    return ByGroup(config, log)
