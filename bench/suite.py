"""The benchmark suite (`make bench`): every scenario against every target, as ratios.

Targets, each started here: durable-kafka (the console script on the local broker; one or
`--instances` processes on one topic prefix), the Node reference server in memory and
file-backed, raw Kafka (confluent-kafka, acks=all, idempotent) where a scenario has a Kafka
equivalent, and in the append scenarios the Python floors (bench/floor_server.py: aiohttp on
uvloop answering appends with no product code, in memory or behind one Kafka transaction per
batch), which say how much of durable-kafka's cost any Python server on this stack pays.
Load comes from the compiled generator in bench/loadgen (Go), a separate process; SSE
fan-out is bench.sse_fanout's, run as a subprocess and folded in; `/bootstrap` vs catch-up of
one stream is bench.suite_bootstrap's, and the cold tier (catch-up from cold vs hot, append
p99 while tiering vs idle) bench.tier_catchup's (durable-kafka only).

    .venv/bin/python -m bench.suite                 # the full run (~25 min on 2 cores)
    .venv/bin/python -m bench.suite --smoke         # tiny sizes (~1.5 min warm)
    .venv/bin/python -m bench.suite --instances 2   # durable-kafka as two processes
    .venv/bin/python -m bench.suite --workers 2     # one instance, `serve --workers 2`

Table on stdout, everything in bench/results/latest.json. Method and figures:
docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import confluent_kafka

from bench import (
    gobuild,
    loadgen_run,
    profiling,
    rawkafka,
    suite_bootstrap,
    suite_memory,
    suite_servers,
    targets,
    tier_catchup,
)
from bench.sse_fanout import REFERENCE_PACKAGE, log, wait_quiet
from bench.suite_goals import fanout_goal, goal_table, goals
from bench.suite_measure import RAW_KAFKA, Context, Row, http_row, raw_row
from bench.suite_report import ratio_table, ratios, table
from bench.suite_scenarios import Scenario, catalogue
from bench.suite_servers import Deployment
from devstack import kafka
from devstack.paths import data_dir

RESULTS = targets.REPO / "bench" / "results"
ALL_TARGETS = (*targets.TARGETS, RAW_KAFKA)
# The suite's own broker, wiped before each run (see `fresh_broker`).
BENCH_BROKER = kafka.KafkaNode(data_dir() / "bench-kafka", port=19592, controller_port=19593)
PROFILED = ("append-latency", "append-100-streams", "append-1000-streams", "append-hot-stream")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.suite",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add("--targets", default=",".join(ALL_TARGETS), help="comma-separated, of %(default)s")
    add("--scenarios", default="", help="comma-separated names (default: all)")
    add("--instances", type=int, default=1, help="durable-kafka processes on one prefix")
    add("--workers", type=int, default=1, help="durable-kafka's `serve --workers` per instance")
    add("--reps", type=int, default=3, help="repetitions per scenario (medians reported)")
    add("--warmup", type=float, default=1, help="seconds of load before each measured window")
    add("--duration", type=float, default=5, help="seconds measured per repetition")
    add("--latency-ops", type=int, default=200, help="timed operations per latency repetition")
    add("--streams-small", type=int, default=100)
    add("--streams-many", type=int, default=1000)
    add("--moderate-rate", type=float, default=200, help="appends/s in append-moderate")
    add("--large-streams", type=int, default=4, help="streams in append-1mib")
    add("--catchup-mib", type=int, default=128, help="size of the stream read in catchup-read")
    add("--memory-streams", default="1000,10000,100000", help="RSS sampled at these counts")
    add("--memory-targets", default="durable-kafka,reference-memory")
    add("--memory-time-cap", type=float, default=300, help="seconds of creating per target")
    add("--fanout-args", default="--scenarios one,many --quiet-timeout 30")
    add("--no-fanout", action="store_true", help="skip bench.sse_fanout")
    add("--no-bootstrap", action="store_true", help="skip bootstrap vs catch-up")
    suite_bootstrap.add_arguments(parser)
    add("--no-tier", action="store_true", help="skip the cold-tier bench")
    tier_catchup.add_arguments(parser)
    add("--bootstrap-servers", default="127.0.0.1:9092")
    add(
        "--no-devstack",
        action="store_true",
        help="measure on the broker at --bootstrap-servers as it is (default: a fresh one)",
    )
    add("--quiet-below", type=float, default=0.25, help="machine busy share to wait for")
    add("--quiet-timeout", type=float, default=60, help="max wait for it before each target")
    add("--reference-long-poll-ms", type=int, default=15_000)
    add("--py-spy", metavar="BIN", help="profile durable-kafka in an extra, unmeasured run")
    add(
        "--broker-warmup",
        type=float,
        default=40,
        help="seconds of transactions on the fresh broker before anything is measured",
    )
    add("--smoke", action="store_true", help="tiny sizes, one repetition")
    add("--out", type=Path, default=RESULTS / "latest.json")
    add("--log-dir", type=Path, default=RESULTS / "logs")
    args = parser.parse_args(argv)
    if args.smoke:
        args.reps, args.warmup, args.duration, args.latency_ops = 1, 0.3, 1, 20
        args.streams_small, args.streams_many, args.catchup_mib = 10, 50, 4
        args.memory_streams, args.quiet_timeout, args.broker_warmup = "200,1000", 0, 2
        args.fanout_args = "--smoke --scenarios many"
    args.targets = [t for t in args.targets.split(",") if t]
    args.run_tag = f"{int(time.time())}-{os.getpid()}"
    return args


def machine(args: argparse.Namespace) -> dict[str, Any]:
    node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False)
    return {
        "command": shlex.join(["python", "-m", "bench.suite", *sys.argv[1:]]),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "cores": os.cpu_count(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "python": platform.python_version(),
        "node": node.stdout.strip(),
        "reference": "@durable-streams/server "
        + json.loads(REFERENCE_PACKAGE.read_text())["version"],
        "kafka": _kafka_version(),
        "confluent_kafka": metadata.version("confluent-kafka"),
        "librdkafka": confluent_kafka.libversion()[0],
        "go": subprocess.run(
            [gobuild.go_binary(), "version"], capture_output=True, text=True, check=False
        ).stdout.strip(),
        "durable_kafka": targets.code_version(),
        "instances": args.instances,
        "workers": args.workers,
    }


def _kafka_version() -> str:
    from devstack.kafka import KAFKA_VERSION  # the broker devstack runs

    return KAFKA_VERSION


def run_target(
    name: str, chosen: list[Scenario], ctx: Context, args: argparse.Namespace
) -> list[Row]:
    options = target_options(args)
    log(f"[{name}] starting")
    args.quiet_share = wait_quiet(args)
    try:
        deployment = suite_servers.start(name, args.log_dir, options, args.instances)
    except targets.TargetError as error:
        log(f"  FAILED: {error}")
        label = suite_servers.row_name(name, args.instances, args.workers)
        wanted = [s for s in chosen if s.runs_on(name)]
        return [Row(label, s.name, s.metric, s.what, failure=str(error)) for s in wanted]
    rows = []
    try:
        for scenario in chosen:
            if not scenario.runs_on(name):
                continue
            log(f"[{deployment.name} / {scenario.name}]")
            row = http_row(ctx, deployment, scenario, scenario.timeout_s(args))
            log(f"  {row.as_json()['median']} {row.failure}")
            rows.append(row)
            if args.py_spy and name == targets.DURABLE_KAFKA and scenario.name in PROFILED:
                profile(ctx, deployment, scenario, args)
    finally:
        deployment.stop()
    return rows


def profile(
    ctx: Context, deployment: Deployment, scenario: Scenario, args: argparse.Namespace
) -> None:
    """One more, unmeasured run of the scenario with py-spy on the (first) server."""
    out = args.log_dir / f"py-spy-suite-{scenario.name}.txt"
    flags: dict[str, object] = {"base": deployment.bases, "prefix": f"p-{ctx.run_tag}-"}
    flags |= scenario.loadgen | {"producer-tag": f"{ctx.run_tag}-profile"}
    recorder = profiling.record(args.py_spy, deployment.pids[0], args.warmup + args.duration, out)
    try:
        loadgen_run.run(ctx.binary, flags, scenario.timeout_s(args))
    except loadgen_run.LoadgenError as error:
        log(f"  profile run failed: {error}")
    log(f"  profile: {profiling.finish(recorder, out)}")


def target_options(args: argparse.Namespace) -> targets.TargetOptions:
    prefix = f"bench.suite.{args.run_tag}."
    return targets.TargetOptions(
        args.bootstrap_servers,
        prefix,
        3_600_000,
        args.reference_long_poll_ms,
        workers=args.workers,
    )


def run_memory(binary: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    milestones = [int(n) for n in args.memory_streams.split(",") if n]
    results = []
    for name in args.memory_targets.split(","):
        if name not in args.targets:
            continue
        log(f"[{name} / memory] creating up to {max(milestones):,} streams")
        deployment = suite_servers.start(name, args.log_dir, target_options(args), args.instances)
        try:
            tag = f"{args.run_tag}-{name}"
            result = suite_memory.streams_memory(
                binary, deployment, milestones, args.memory_time_cap, tag
            )
        except loadgen_run.LoadgenError as error:
            result = {"target": name, "points": [], "errors": 0, "stopped": str(error)}
        finally:
            deployment.stop()
        log(f"  {result}")
        results.append(result)
    return results


def run_fanout(args: argparse.Namespace) -> dict[str, Any] | None:
    out = RESULTS / "sse_fanout_suite.json"
    wanted = [t for t in args.targets if t in targets.PROTOCOL_TARGETS]  # floors: no SSE
    command = [sys.executable, "-m", "bench.sse_fanout", *shlex.split(args.fanout_args)]
    command += ["--targets", ",".join(wanted), "--out", str(out), "--no-devstack"]
    command += ["--bootstrap-servers", args.bootstrap_servers]
    log(f"[sse fan-out] {shlex.join(command)}")
    try:
        subprocess.run(command, timeout=3600, check=False, stdout=sys.stderr)
    except subprocess.TimeoutExpired:
        log("  sse fan-out did not finish within an hour")
        return None
    if not out.exists():
        return None
    document: dict[str, Any] = json.loads(out.read_text())
    return document


def run_bootstrap(args: argparse.Namespace) -> dict[str, Any] | None:
    """`/bootstrap` vs catch-up of one stream on a fresh durable-kafka (bench.suite_bootstrap)."""
    if args.no_bootstrap or targets.DURABLE_KAFKA not in args.targets:
        return None
    log("[durable-kafka / bootstrap vs catch-up]")
    options = target_options(args)

    def start() -> targets.Server:
        return targets.start(targets.DURABLE_KAFKA, args.log_dir, options)

    try:
        result = suite_bootstrap.run(start, suite_bootstrap.sizes_of(args), args.reps, args.run_tag)
    except (suite_bootstrap.BenchError, targets.TargetError) as error:
        log(f"  FAILED: {error}")
        return {"failure": str(error)}
    log(f"  {result['ratios']}")
    return result


def run_tier(args: argparse.Namespace) -> dict[str, Any] | None:
    """Catch-up from the cold tier vs hot, append p99 while tiering vs idle (bench.tier_catchup:
    an in-process durable-kafka on the suite's broker)."""
    if args.no_tier or targets.DURABLE_KAFKA not in args.targets:
        return None
    log("[durable-kafka / cold tier]")
    try:
        result = tier_catchup.run(args, args.run_tag.replace("-", ""))
    except tier_catchup.BenchError as error:
        log(f"  FAILED: {error}")
        return {"failure": str(error)}
    log(f"  {result['ratios']}")
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    unknown = [t for t in args.targets if t not in ALL_TARGETS]
    every = catalogue(args)
    names = [s for s in args.scenarios.split(",") if s] or [s.name for s in every]
    unknown += [n for n in names if n not in {s.name for s in every}]
    if unknown:
        log(f"unknown target or scenario: {', '.join(unknown)}")
        return 2
    chosen = [s for s in every if s.name in names]
    targets.raise_fd_limit()
    if args.no_devstack:
        return measure(args, chosen)
    node = fresh_broker()
    args.bootstrap_servers = node.bootstrap_servers
    try:
        if args.broker_warmup > 0:
            log(f"[broker warm-up] {args.broker_warmup:g} s of transactions")
            _, committed = rawkafka.warm_broker(node.bootstrap_servers, args.broker_warmup)
            log(f"  {committed} transactions")
        return measure(args, chosen)
    finally:
        kafka.stop(node)


def fresh_broker() -> kafka.KafkaNode:
    """A broker of its own on an empty data directory. The development broker collects the
    topics of every test and run: at 13,000 partitions its heap was full and its garbage
    collector took three times its request handlers' CPU, halving every append figure."""
    node = BENCH_BROKER
    kafka.stop(node)
    shutil.rmtree(node.home, ignore_errors=True)
    node.home.mkdir(parents=True)
    kafka.start(node)
    return node


def measure(args: argparse.Namespace, chosen: list[Scenario]) -> int:
    """Every chosen scenario on every target, then the table."""
    binary = loadgen_run.build()
    facts = machine(args)
    ctx = Context(binary, args.run_tag, args.reps, args.bootstrap_servers, "bench.suite.raw.")
    rows: list[Row] = []
    if RAW_KAFKA in args.targets:
        for scenario in chosen:
            if scenario.raw is not None:
                log(f"[raw-kafka / {scenario.name}]")
                rows.append(raw_row(ctx, scenario, scenario.timeout_s(args)))
    for name in args.targets:
        if name != RAW_KAFKA:
            rows += run_target(name, chosen, ctx, args)
    memory = run_memory(binary, args) if args.memory_streams else []
    fanout = None if args.no_fanout else run_fanout(args)
    boot = run_bootstrap(args)
    tier = run_tier(args)
    return report(args, facts, [row.as_json() for row in rows], memory, fanout, boot, tier)


def report(
    args: argparse.Namespace,
    facts: dict[str, Any],
    rows: list[dict[str, Any]],
    memory: list[dict[str, Any]],
    fanout: dict[str, Any] | None,
    boot: dict[str, Any] | None,
    tier: dict[str, Any] | None = None,
) -> int:
    ratio_rows = ratios(rows)
    checked = goals(rows, args.streams_small, args.streams_many, memory)
    checked.append(fanout_goal(fanout))
    print(table(rows), "", ratio_table(ratio_rows), "", memory_table(memory), "", sep="\n")
    print(goal_table(checked))
    if boot is not None:
        print("", boot.get("failure") or suite_bootstrap.table(boot), sep="\n")
    if tier is not None:
        print("", tier.get("failure") or tier_catchup.table(tier), sep="\n")
    document: dict[str, Any] = {"run": facts, "rows": rows, "ratios": ratio_rows}
    document["memory"] = memory
    document |= {"goals": checked, "sse_fanout": fanout, "bootstrap": boot, "tier": tier}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=2) + "\n")
    log(f"wrote {args.out}")
    failed = any(row["failure"] for row in rows) or any(
        bool(part and part.get("failure")) for part in (boot, tier)
    )
    return 1 if failed else 0


def memory_table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| target | streams -> RSS MiB (elapsed s) | create errors | note |",
        "|---|---|---|---|",
    ]
    for r in results:
        points = ", ".join(
            f"{p['streams']:,} -> {p['rss_kib'] / 1024:.0f} ({p['elapsed_s']:g})"
            for p in r["points"]
        )
        lines.append(f"| {r['target']} | {points} | {r['errors']} | {r.get('stopped', '')} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
