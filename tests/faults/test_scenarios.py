"""The bounded fault suite of `make test`: a few faults on a 3-broker cluster (~1 min each)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from devstack import cluster
from tests.faults import faults, runner

pytestmark = pytest.mark.faults


@pytest.fixture(scope="module")
def cluster_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("faults")
    try:
        cluster.start_cluster(home / "cluster")
        yield home
    finally:
        cluster.stop_cluster(home / "cluster")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", faults.BOUNDED)
async def test_no_anomaly_under_fault(cluster_home: Path, name: str) -> None:
    report = await runner.run(name, faults.ALL[name], cluster_home, seed=14)
    print(report.line())
    assert report.acknowledged > 0
    assert report.ok, f"{report.line()}\n{report.details()}"
