"""The checker is shown to fail on a broken build: `endtxn_lost` with `trust_unknown_outcomes`
(an unknown commit outcome answered 503 without learning it) and `serve_below_retention`
(reads below a snapshot's offset served, not 410) must be reported; the same scenario on the
real build must not. A broken cold tier (`cold_reads_empty`: tiered ranges read as holding
nothing; `tier_skip_puts`: ranges committed whose chunks were never stored) must be reported
by the rules on the cold tier, cold reads and bootstraps. A covered offset past records no state
record shows (`cover_to_the_end`) must be reported after a killed owner's slots are taken
over."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.faults import faults, runner
from tests.faults.kafka_log import log_starts
from tests.faulty_adapter import fault_env

pytestmark = pytest.mark.faults

BROKEN = fault_env(trust_unknown_outcomes=True, serve_below_retention=True)
BROKEN_TIER = fault_env(cold_reads_empty=True, tier_skip_puts=True)
BROKEN_COVER = fault_env(cover_to_the_end=True)
# Load with no fault until a partition's log has been freed below a tiered range (at
# most FREED_WITHIN_S: on a busy machine it takes longer), then TIERING_S more of reads from -1
# and bootstraps across the ranges the broken tier lost.
FREED_WITHIN_S = 90.0
TIERING_S = 8.0
BOOTSTRAP_WITHIN_S = 30.0


@pytest.mark.timeout(300)
async def test_the_checker_reports_a_broken_build(cluster_home: Path) -> None:
    env = faults.ENV["endtxn_lost"] | BROKEN
    report = await runner.run("endtxn_lost", faults.endtxn_lost, cluster_home, 14, faulty=env)
    print(report.line())
    # A commit that happened, answered 503: a plain append is in the log though every attempt
    # was 5xx (phantom), or a producer's retry is written again (duplicated).
    assert report.count("phantom") + report.count("duplicated") > 0, report.line()
    # Reads below a snapshot are served: during the load, reads from -1 well after a publish
    # (retention), or at the end, every instance's read from -1 of the snapshotted stream
    # answering 200 instead of 410 (snapshots). Which of the two shows it depends on the pace:
    # once retention has freed the log below the snapshot, even the broken build answers 410
    # at the end, and a loaded machine may read from -1 only right after each publish.
    assert report.count("snapshots") + report.count("retention") > 0, report.line()


@pytest.mark.timeout(300)
async def test_the_same_scenario_on_the_real_build_has_no_anomaly(cluster_home: Path) -> None:
    env = faults.ENV["endtxn_lost"]
    report = await runner.run("endtxn_lost", faults.endtxn_lost, cluster_home, 14, faulty=env)
    print(report.line())
    assert report.acknowledged > 0
    assert report.ok, f"{report.line()}\n{report.details()}"


async def _tiering(ctx: runner.Context) -> None:
    topic, _ = ctx.busy_partition()
    deadline = asyncio.get_running_loop().time() + FREED_WITHIN_S
    while asyncio.get_running_loop().time() < deadline:
        if any((await asyncio.to_thread(log_starts, ctx.bootstrap, topic)).values()):
            break
        await asyncio.sleep(1.0)
    await asyncio.sleep(TIERING_S)
    # At least one `/bootstrap` of the busiest stream answered in full after the log was freed,
    # across what the broken tier lost: on a loaded machine the load's own may all have come
    # before the loss or failed (CI once saw none that showed it).
    bootstraps = ctx.load.history.bootstraps
    recorded, loop = len(bootstraps), asyncio.get_running_loop()
    until = loop.time() + BOOTSTRAP_WITHIN_S
    while len(bootstraps) == recorded and loop.time() < until:
        await ctx.load.bootstrap(runner.BUSY)


@pytest.mark.timeout(420)
async def test_the_checker_reports_a_broken_cold_tier(cluster_home: Path) -> None:
    # The load without forks into another bucket, trims, fences and age retention: what it
    # shows of a broken cold tier needs none of them, which cost this run about 40 s more.
    report = await runner.run(
        "cold_broken", _tiering, cluster_home, 14, faulty=BROKEN_TIER, wide=False
    )
    print(report.line())
    # The manifest lists chunks the store never got; their acknowledged appends are nowhere.
    assert report.count("cold") > 0, report.line()
    assert report.count("lost") > 0, report.line()
    # Reads from -1 and bootstraps served the tiered ranges as empty.
    assert report.count("stale_reads") > 0, report.line()
    assert report.count("bootstraps") > 0, report.line()


@pytest.mark.timeout(300)
async def test_the_checker_reports_a_covered_offset_past_unrecorded_records(
    cluster_home: Path,
) -> None:
    # The killed owner comes back without its catalog file: its own rows would otherwise
    # carry the appends its checkpoints never wrote back into its slots when it regains them.
    report = await runner.run(
        "adapter_kill", _killed_without_catalog, cluster_home, 14, faulty=BROKEN_COVER
    )
    print(report.line())
    # The killed owner's slots are taken over without the appends no checkpoint wrote: their
    # streams' tails go back, so what was acknowledged past them is not read (lost), or served
    # unlike a fresh instance learning the tails from the log (divergent), or a producer's
    # retry is taken for a new append (duplicated).
    found = sum(report.count(kind) for kind in ("divergent", "lost", "duplicated"))
    assert found > 0, report.line()


async def _killed_without_catalog(ctx: runner.Context) -> None:
    await faults.owner_killed(ctx, catalog_lost=True)
