"""Measuring one scenario on one target: repetitions, /proc figures around each, medians."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import loadgen_run, targets
from bench.fanout_procs import PeakSampler
from bench.suite_scenarios import Scenario
from bench.suite_servers import Deployment

RAW_KAFKA = "raw-kafka"
FIGURES = (
    "rate",
    "mb_per_s",
    "p50_ms",
    "p99_ms",
    "loadgen_cpu",
    "server_cpu",
    "server_cpu_us_per_op",
    "machine_busy",
)


@dataclass
class Row:
    target: str
    scenario: str
    metric: str
    what: str
    reps: list[dict[str, Any]] = field(default_factory=list)
    failure: str = ""

    def median(self, key: str) -> float | None:
        values = [float(rep[key]) for rep in self.reps if rep.get(key) is not None]
        return statistics.median(values) if values else None

    def as_json(self) -> dict[str, Any]:
        medians = {key: self.median(key) for key in FIGURES}
        peaks = [rep["rss_peak_kib"] for rep in self.reps if rep.get("rss_peak_kib")]
        return {
            "target": self.target,
            "scenario": self.scenario,
            "metric": self.metric,
            "what": self.what,
            "median": medians,
            "ok": sum(int(rep.get("ok", 0)) for rep in self.reps),
            "errors": sum(int(rep.get("errors", 0)) for rep in self.reps),
            "rss_peak_kib": max(peaks) if peaks else None,
            "error_samples": [s for rep in self.reps for s in rep.get("error_samples", [])][:5],
            "failure": self.failure,
            "reps": self.reps,
        }


@dataclass(frozen=True)
class Context:
    binary: Path
    run_tag: str
    reps: int
    bootstrap: str
    topic_prefix: str  # raw Kafka's topics


class Probe:
    """CPU and machine jiffies at the start of a repetition; the RSS peak sampled meanwhile."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.samplers = [PeakSampler(pid) for pid in pids]
        for sampler in self.samplers:
            sampler.start()
        self.cpu = sum(targets.cpu_seconds(pid) for pid in pids)
        self.jiffies = targets.machine_jiffies()
        self.at = time.monotonic()

    def finish(self, figures: dict[str, Any]) -> None:
        wall, cores = max(1e-9, time.monotonic() - self.at), os.cpu_count() or 1
        figures["rss_peak_kib"] = sum(sampler.finish() for sampler in self.samplers) or None
        if self.pids:
            cpu = sum(targets.cpu_seconds(pid) for pid in self.pids) - self.cpu
            figures["server_cpu"] = cpu / wall / cores
        busy, total = (b - a for a, b in zip(self.jiffies, targets.machine_jiffies(), strict=True))
        figures["machine_busy"] = busy / max(1, total)


def keep(report: dict[str, Any], cpu_share: float) -> dict[str, Any]:
    wanted = ("ok", "errors", "rate", "mb_per_s", "p50_ms", "p99_ms", "max_ms", "seconds")
    figures = {key: report.get(key) for key in wanted}
    figures["statuses"] = report.get("statuses", {})
    figures["error_samples"] = report.get("error_samples", [])[:3]
    figures["loadgen_cpu"] = cpu_share
    figures["server_cpu_us_per_op"] = cpu_per_op(report)
    return figures


def cpu_per_op(report: dict[str, Any]) -> float | None:
    """The servers' CPU microseconds per acknowledged request in the measured window: their
    utime + stime from /proc, read by the generator as the window opens and closes."""
    seconds, ok = report.get("server_cpu_s"), int(report.get("ok") or 0)
    return None if seconds is None or not ok else float(seconds) / ok * 1e6


def http_row(ctx: Context, deployment: Deployment, scenario: Scenario, timeout_s: float) -> Row:
    row = Row(deployment.name, scenario.name, scenario.metric, scenario.what)
    common: dict[str, object] = {
        "base": deployment.bases,
        "prefix": f"s-{ctx.run_tag}-{scenario.name}-",
        "server-pids": ",".join(str(pid) for pid in deployment.pids),
    }
    try:
        if scenario.setup is not None:
            outcome = loadgen_run.run(ctx.binary, common | scenario.setup, timeout_s)
            if outcome.report["errors"]:
                raise loadgen_run.LoadgenError(f"setup failed: {outcome.report['error_samples']}")
        for rep in range(ctx.reps):
            flags: dict[str, object] = dict(common)
            if scenario.fresh_prefix:
                flags["prefix"] = f"{common['prefix']}r{rep}-"
            flags |= scenario.loadgen | {"producer-tag": f"{ctx.run_tag}-r{rep}"}
            probe = Probe(deployment.pids)
            outcome = loadgen_run.run(ctx.binary, flags, timeout_s)
            figures = keep(outcome.report, outcome.cpu_share)
            probe.finish(figures)
            row.reps.append(figures)
            if not deployment.alive():
                raise targets.TargetError("a server exited during the scenario")
    except (loadgen_run.LoadgenError, targets.TargetError, ValueError) as error:
        row.failure = f"{type(error).__name__}: {error}"
    return row


def raw_row(ctx: Context, scenario: Scenario, timeout_s: float) -> Row:
    assert scenario.raw is not None
    row = Row(RAW_KAFKA, scenario.name, scenario.metric, scenario.what)
    topic = f"{ctx.topic_prefix}{ctx.run_tag}.{scenario.name}"
    try:
        for rep in range(ctx.reps):
            flags = dict(scenario.raw)
            command = [sys.executable, "-m", "bench.rawkafka", str(flags.pop("mode"))]
            command += ["--bootstrap", ctx.bootstrap, "--topic", f"{topic}.r{rep}", "--create"]
            for key, value in flags.items():
                command += [f"--{key}", str(value)]
            probe = Probe([])
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=timeout_s, check=False
            )
            if done.returncode != 0:
                raise RuntimeError(f"bench.rawkafka exited {done.returncode}: {done.stderr[-400:]}")
            report = json.loads(done.stdout.strip().splitlines()[-1])
            seconds = float(report["seconds"]) or 1e-9
            figures = keep(report, float(report["cpu_s"]) / seconds / (os.cpu_count() or 1))
            probe.finish(figures)
            row.reps.append(figures)
    except (subprocess.TimeoutExpired, RuntimeError, ValueError) as error:
        row.failure = f"{type(error).__name__}: {error}"
    return row
