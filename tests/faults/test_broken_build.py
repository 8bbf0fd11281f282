"""The checker is shown to fail on a broken build: `endtxn_lost` with `trust_unknown_outcomes`
(an unknown commit outcome answered 503 without learning it) and `serve_below_retention`
(reads below a snapshot's offset served, not 410) must be reported; the same scenario on the
real build must not."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults import faults, runner

pytestmark = pytest.mark.faults

BROKEN = {
    "DURABLE_KAFKA_TRUST_UNKNOWN_OUTCOMES": "true",
    "DURABLE_KAFKA_SERVE_BELOW_RETENTION": "true",
}


@pytest.mark.timeout(300)
async def test_the_checker_reports_a_broken_build(cluster_home: Path) -> None:
    env = faults.ENV["endtxn_lost"] | BROKEN
    report = await runner.run("endtxn_lost", faults.endtxn_lost, cluster_home, 14, faulty=env)
    print(report.line())
    # A commit that happened, answered 503: a plain append is in the log though every attempt
    # was 5xx (phantom), or a producer's retry is written again (duplicated).
    assert report.count("phantom") + report.count("duplicated") > 0, report.line()
    # Every instance's read from -1 of the snapshotted stream answers 200 instead of 410
    # (snapshots); reads from -1 well after a publish are served (retention, if the load ran
    # long enough after one).
    assert report.count("snapshots") > 0, report.line()


@pytest.mark.timeout(300)
async def test_the_same_scenario_on_the_real_build_has_no_anomaly(cluster_home: Path) -> None:
    env = faults.ENV["endtxn_lost"]
    report = await runner.run("endtxn_lost", faults.endtxn_lost, cluster_home, 14, faulty=env)
    print(report.line())
    assert report.acknowledged > 0
    assert report.ok, f"{report.line()}\n{report.details()}"
