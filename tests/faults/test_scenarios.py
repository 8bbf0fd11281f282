"""The bounded fault suite of `make test`: a few faults on a 3-broker cluster (~1 min each)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults import faults, runner

pytestmark = pytest.mark.faults


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", faults.BOUNDED)
async def test_no_anomaly_under_fault(cluster_home: Path, name: str) -> None:
    report = await runner.run(
        name, faults.ALL[name], cluster_home, seed=14, faulty=faults.ENV.get(name)
    )
    print(report.line())
    assert report.acknowledged > 0
    assert report.ok, f"{report.line()}\n{report.details()}"
