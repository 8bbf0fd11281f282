"""Session-scoped real services for the integration tier, and settings that point at them."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from adapter.config import Settings
from tests.integration.services import S3Server, kafka_broker, s3_server


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


@pytest.fixture
def make_settings(kafka_bootstrap: str, unique: str, tmp_path: Path) -> SettingsFactory:
    """Settings on the test broker, with a topic prefix of this test's own."""

    def make(**overrides: Any) -> Settings:
        base = Settings(
            bootstrap_servers=kafka_bootstrap,
            topic_prefix=f"t{unique}.",
            partitions=3,
            cold_dir=str(tmp_path / "cold"),
            kafka_timeout_ms=5_000,
        )
        return replace(base, **overrides)

    return make
