"""One 3-broker cluster and one MinIO for every scenario test of `tests/faults`: started for the
first of them and stopped after the last (the tests run together: tests/conftest.py), so that
idle brokers do not take CPU from the rest of the session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from devstack import cluster
from tests.faults import store
from tests.services import DISCARD_S


@pytest.fixture(scope="package")
def cluster_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("faults")
    try:
        cluster.start_cluster(home / "cluster")
        store.start(home)
        yield home
    finally:
        store.stop(home, DISCARD_S)
        cluster.stop_cluster(home / "cluster", DISCARD_S)
