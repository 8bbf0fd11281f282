"""SSE fan-out load test: append->delivery latency and memory per subscriber, against references.

For each target (durable-kafka on the local broker, the Node reference server in memory and
file-backed) and each scenario (many subscribers of one stream; one subscriber on each of many
streams) it starts the server, creates the streams, connects the subscribers from worker
processes, appends at a fixed rate from an appender process, and reports per target and
scenario: delivered/expected messages, errors, latency p50/p99/max, server RSS before the
subscribers and at peak, RSS per subscriber, CPU shares, and the ratios durable-kafka /
reference. Table on stdout, JSON in bench/results/sse_fanout.json.

    .venv/bin/python -m bench.sse_fanout            # the full run (~15 min on 2 cores)
    .venv/bin/python -m bench.sse_fanout --smoke    # tiny sizes, one server per target
    .venv/bin/python -m bench.sse_fanout --smoke --targets reference-memory   # ~20 s

Method, figures and what limits them: docs/performance.md, "SSE fan-out (live tails)".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from bench import fanout_gosub, profiling, targets
from bench.fanout_load import AppenderSpec, WorkerSpec, appender_main, worker_main
from bench.fanout_procs import (
    BenchError,
    CpuSnapshot,
    PeakSampler,
    Pipes,
    Proc,
    reap,
    record_cpu,
    spawn,
)
from bench.fanout_stats import Row, merge, percentile_ms, ratios, table

RESULTS = targets.REPO / "bench" / "results"
REFERENCES = (targets.REFERENCE_MEMORY, targets.REFERENCE_FILE)
REFERENCE_PACKAGE = (
    targets.REPO / "conformance" / "node_modules" / "@durable-streams" / "server" / "package.json"
)


@dataclass(frozen=True)
class Scenario:
    name: str
    subscribers: int
    streams: int
    rate: float


def scenarios(args: argparse.Namespace) -> dict[str, Scenario]:
    return {
        "one": Scenario("one", args.subscribers, 1, args.rate),
        "one-big": Scenario("one-big", args.big_subscribers, 1, args.big_rate),
        "many": Scenario("many", args.streams, args.streams, args.many_rate),
    }


# -- one scenario --------------------------------------------------------------------------


def create_streams(base_url: str, names: list[str]) -> list[str]:
    return asyncio.run(_create_streams(base_url, names))


async def _create_streams(base_url: str, names: list[str]) -> list[str]:
    gate = asyncio.Semaphore(20)
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout) as session:

        async def create(name: str) -> str:
            url = f"{base_url}/v1/stream/{name}"
            async with gate, session.put(url, headers={"Content-Type": "text/plain"}) as reply:
                if reply.status not in (200, 201):
                    raise BenchError(f"PUT {url}: {reply.status} {await reply.text()}")
            return url

        return await asyncio.gather(*(create(name) for name in names))


def wait_quiet(args: argparse.Namespace) -> float:
    """Other work shares this machine: wait (bounded) until it is mostly idle; its busy share."""
    deadline = time.monotonic() + args.quiet_timeout
    while True:
        before = targets.machine_jiffies()
        time.sleep(1)
        busy, total = (b - a for a, b in zip(before, targets.machine_jiffies(), strict=True))
        share = busy / max(1, total)
        if share <= args.quiet_below or time.monotonic() > deadline:
            return share
        log(f"  machine {share:.0%} busy before the scenario: waiting for it to quieten")


def measure(server: targets.Server, scenario: Scenario, args: argparse.Namespace, row: Row) -> None:
    tag = f"{args.run_tag}-{scenario.name}-{row.target}"
    urls = create_streams(server.url, [f"fanout-{tag}-{i}" for i in range(scenario.streams)])
    row.background_cpu = wait_quiet(args)
    row.rss_before_kib = targets.rss_kib(server.pid)
    sampler = PeakSampler(server.pid)
    sampler.start()
    pipes, processes = Pipes(), list[Proc]()
    profile = args.log_dir / f"py-spy-{row.target}-{scenario.name}.txt"
    window: Window | None = None
    try:
        processes = start_workers(pipes, scenario, urls, args)
        connect(pipes, scenario, args, row)
        row.rss_connected_kib = targets.rss_kib(server.pid)
        window = Window(pipes, row, server.pid, processes, profile)
        processes.append(start_appender(pipes, scenario, urls, args, window))
        acked = append(pipes, processes[-1], args)
        drain(pipes, scenario, acked, args)
        window.delivered()
        stop_workers(pipes)
        collect(pipes, scenario, acked, row)
    finally:
        row.rss_peak_kib = sampler.finish()
        if window is not None:
            window.finish()
        for conn in pipes.names:
            conn.close()
        reap(processes)


def start_workers(
    pipes: Pipes, scenario: Scenario, urls: list[str], args: argparse.Namespace
) -> list[Proc]:
    per_worker = args.per_worker or (5000 if args.client == "go" else 500)
    count = -(-scenario.subscribers // per_worker)
    per_connect = max(1, args.connect_concurrency // count)
    expected_seqs = int(scenario.rate * (args.warmup + args.duration + args.cooldown) * 1.2) + 64
    processes: list[Proc] = []
    for index in range(count):
        first = index * per_worker
        last = min(scenario.subscribers, first + per_worker)
        mine = [urls[k % len(urls)] for k in range(first, last)]
        name = f"worker-{index}"
        if args.client == "go":
            worker = fanout_gosub.GoWorker(args.go_binary, name, mine, per_connect, expected_seqs)
            pipes.add(name, worker)
            processes.append(worker)
        else:
            spec = WorkerSpec(index, mine, per_connect, expected_seqs)
            processes.append(spawn(pipes, name, worker_main, spec))
    return processes


def connect(pipes: Pipes, scenario: Scenario, args: argparse.Namespace, row: Row) -> None:
    started = time.monotonic()
    deadline = started + args.connect_timeout
    while pipes.total("connected") < scenario.subscribers and time.monotonic() < deadline:
        pipes.pump(0.5)
    row.connect_s = round(time.monotonic() - started, 2)
    row.connected = pipes.total("connected")
    log(f"  {row.connected}/{scenario.subscribers} connected in {row.connect_s} s")
    if row.connected == 0:
        raise BenchError("no subscriber connected")


class Window:
    """The measured window: CPU snapshots at its edges, the workers told, the server profiled."""

    def __init__(
        self, pipes: Pipes, row: Row, server_pid: int, workers: list[Proc], profile: Path
    ) -> None:
        self.pipes, self.row, self.server_pid = pipes, row, server_pid
        self.worker_names = [process.name for process in workers]
        self.worker_pids = [process.pid or 0 for process in workers]
        self.appender_pid = 0
        self.snapshots: list[CpuSnapshot] = []
        self.profile = profile
        self.profiler: subprocess.Popen[bytes] | None = None
        self.start: tuple[CpuSnapshot, int] | None = None

    def on_phase(self, phase: str, args: argparse.Namespace) -> None:
        if phase not in ("M", "C"):
            return
        snapshot = CpuSnapshot.take(self.server_pid, self.worker_pids, self.appender_pid)
        self.snapshots.append(snapshot)
        self.pipes.send(self.worker_names, "measure" if phase == "M" else "end")
        if phase == "M":
            self.start = (snapshot, self.pipes.total("messages"))
        if phase == "M" and args.py_spy and self.row.target == targets.DURABLE_KAFKA:
            self.profiler = profiling.record(
                args.py_spy, self.server_pid, args.duration, self.profile
            )
        if len(self.snapshots) == 2:
            record_cpu(self.row, *self.snapshots)

    def delivered(self) -> None:
        """CPU per delivered message, from the window's start until now (the drain's end)."""
        if self.start is None:
            return
        begin, messages = self.start
        now = CpuSnapshot.take(self.server_pid, self.worker_pids, self.appender_pid)
        count = self.pipes.total("messages") - messages
        if count > 0:
            server = now.server - begin.server
            self.row.server_us_per_delivery = round(server * 1e6 / count, 1)
            workers = sum(now.workers) - sum(begin.workers)
            self.row.loadgen_us_per_delivery = round(workers * 1e6 / count, 1)

    def finish(self) -> None:
        if self.profiler is not None:
            summary = profiling.finish(self.profiler, self.profile)
            log(f"  profile: {summary}")


def start_appender(
    pipes: Pipes, scenario: Scenario, urls: list[str], args: argparse.Namespace, window: Window
) -> Proc:
    spec = AppenderSpec(urls, scenario.rate, args.warmup, args.duration, args.cooldown)
    pipes.on_phase = lambda phase: window.on_phase(phase, args)
    appender = spawn(pipes, "appender", appender_main, spec)
    window.appender_pid = appender.pid or 0
    total = args.warmup + args.duration + args.cooldown
    log(f"  appending {scenario.rate:g}/s for {total:g} s ({args.duration:g} s measured)")
    return appender


def append(pipes: Pipes, appender: Proc, args: argparse.Namespace) -> dict[str, Any]:
    deadline = time.monotonic() + args.warmup + args.duration + args.cooldown + 60
    while "appender" not in pipes.results:
        if time.monotonic() > deadline:
            raise BenchError("the appender did not finish")
        pipes.pump(0.5)
    return pipes.results["appender"]


def expected_per_subscriber(scenario: Scenario, acked: dict[str, Any]) -> list[int]:
    per_stream: list[int] = acked["acked_measured"]
    return [per_stream[k % len(per_stream)] for k in range(scenario.subscribers)]


def drain(
    pipes: Pipes, scenario: Scenario, acked: dict[str, Any], args: argparse.Namespace
) -> None:
    """Wait until every acknowledged message arrived, or nothing arrived for a while."""
    expected = sum(expected_per_subscriber(scenario, acked))
    deadline = time.monotonic() + args.drain_timeout
    last, last_change = -1, time.monotonic()
    while pipes.total("measured") < expected and time.monotonic() < deadline:
        pipes.pump(0.25)
        if pipes.total("measured") != last:
            last, last_change = pipes.total("measured"), time.monotonic()
        elif time.monotonic() - last_change > args.drain_idle:
            break


def stop_workers(pipes: Pipes) -> None:
    workers = [name for name in pipes.names.values() if name.startswith("worker-")]
    pipes.send(workers, "stop")
    deadline = time.monotonic() + 60
    while any(name not in pipes.results for name in workers) and time.monotonic() < deadline:
        pipes.pump(0.5)


def collect(pipes: Pipes, scenario: Scenario, acked: dict[str, Any], row: Row) -> None:
    results = [pipes.results[name] for name in sorted(pipes.results) if name != "appender"]
    received = [count for result in results for count in result["received"]]
    expected = expected_per_subscriber(scenario, acked)
    row.expected = sum(expected)
    row.delivered = sum(min(r, e) for r, e in zip(received, expected, strict=False))
    histogram = merge({int(k): v for k, v in r["histogram"].items()} for r in results)
    lost = row.expected - row.delivered
    row.p50_ms = percentile_ms(histogram, 0.50, lost)
    row.p99_ms = percentile_ms(histogram, 0.99, lost)
    row.max_ms = max(r["max_us"] for r in results) / 1000 if histogram and not lost else None
    for key in ("errors", "disconnects", "duplicates", "never_connected"):
        setattr(row, key, sum(r[key] for r in results))
    messages = sum(r["messages"] for r in results)
    if messages:
        row.reads_per_message = round(sum(r["chunks"] for r in results) / messages, 2)
    row.worker_lag_p99_ms = round(max(r["lag_p99_ms"] for r in results), 1)
    row.worker_lag_max_ms = round(max(r["lag_max_ms"] for r in results), 1)
    row.error_samples = [s for r in results for s in r["error_samples"]][:5]
    row.error_samples += acked["error_samples"]
    row.appends_sent, row.appends_ok, row.append_errors = (
        acked["sent"],
        acked["ok"],
        acked["errors"],
    )
    row.append_p50_ms, row.append_p99_ms = acked["append_p50_ms"], acked["append_p99_ms"]
    row.appender_max_behind_ms = round(acked["max_behind_ms"], 1)
    if len(received) != scenario.subscribers:
        row.failure = f"results from {len(received)} of {scenario.subscribers} subscribers"


# -- the run -------------------------------------------------------------------------------


def run_target(
    name: str, chosen: list[Scenario], args: argparse.Namespace, dk: targets.TargetOptions
) -> list[Row]:
    rows: list[Row] = []
    server: targets.Server | None = None
    try:
        for scenario in chosen:
            if server is None:
                code = targets.code_version()
                server = targets.start(name, args.log_dir, dk)
            row = Row(
                name,
                scenario.name,
                scenario.subscribers,
                scenario.streams,
                scenario.rate,
                args.duration,
                code if name == targets.DURABLE_KAFKA else "",
            )
            log(f"[{name} / {scenario.name}] {scenario.subscribers} subscribers")
            try:
                measure(server, scenario, args, row)
            except (BenchError, targets.TargetError, aiohttp.ClientError, OSError) as error:
                row.failure = f"{type(error).__name__}: {error}"
                log(f"  FAILED: {row.failure}")
            if server.process.poll() is not None:
                row.failure = f"server exited with {server.process.returncode}"
            rows.append(row)
            if not args.reuse_server:
                row.server_stop_s = round(targets.stop(server), 2)
                server = None
    finally:
        if server is not None:
            stopped_in = round(targets.stop(server), 2)
            if rows:
                rows[-1].server_stop_s = stopped_in
    return rows


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def preflight(args: argparse.Namespace, chosen: list[Scenario]) -> dict[str, object]:
    limit = targets.raise_fd_limit()
    biggest = max((s.subscribers for s in chosen), default=0)
    if limit < biggest + 1000:
        log(f"WARNING: RLIMIT_NOFILE hard limit {limit} is too low for {biggest} connections")
    low, high = (int(v) for v in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    if high - low < biggest + 1000:
        log(f"WARNING: {high - low} ephemeral ports are too few for {biggest} connections")
    if targets.DURABLE_KAFKA in args.targets and not args.no_devstack:
        subprocess.run([sys.executable, "-m", "devstack", "up", "kafka"], check=True)
    node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False)
    return {
        "command": " ".join([Path(sys.executable).name, "-m", "bench.sse_fanout", *sys.argv[1:]]),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "cores": os.cpu_count(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "fd_limit": limit,
        "ephemeral_ports": high - low + 1,
        "python": platform.python_version(),
        "node": node.stdout.strip(),
        "reference": "@durable-streams/server "
        + json.loads(REFERENCE_PACKAGE.read_text())["version"],
        "durable_kafka": targets.code_version(),
        "aiohttp": aiohttp.__version__,
        "client": args.client,
        "go": _go_version() if args.client == "go" else None,
    }


def _go_version() -> str:
    reply = subprocess.run(["go", "version"], capture_output=True, text=True, check=False)
    return reply.stdout.strip()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.sse_fanout",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add(
        "--targets",
        default=",".join(targets.PROTOCOL_TARGETS),
        help="comma-separated, of %(default)s",
    )
    add("--scenarios", default="one,one-big,many", help="comma-separated, of %(default)s")
    add("--subscribers", type=int, default=1000, help="subscribers of one stream in 'one'")
    add("--big-subscribers", type=int, default=10_000, help="subscribers in 'one-big'")
    add("--streams", type=int, default=1000, help="streams (1 subscriber each) in 'many'")
    add("--rate", type=float, default=50, help="appends/s in 'one' and 'one-big'")
    add("--big-rate", type=float, default=5, help="appends/s in 'one-big'")
    add("--many-rate", type=float, default=50, help="appends/s over all streams in 'many'")
    add("--warmup", type=float, default=3, help="seconds of appends not measured")
    add("--duration", type=float, default=20, help="seconds of measured appends")
    add("--cooldown", type=float, default=1, help="seconds of appends after the window")
    add("--client", choices=("go", "python"), default="go", help="subscriber load generator")
    add("--per-worker", type=int, help="subscribers per worker (default: go 5000, python 500)")
    add("--connect-concurrency", type=int, default=200, help="connects in flight, in all")
    add("--connect-timeout", type=float, default=300)
    add("--drain-timeout", type=float, default=60, help="max wait for late deliveries")
    add("--drain-idle", type=float, default=5, help="stop waiting after this long idle")
    add("--sse-max-duration-ms", type=int, default=3_600_000, help="durable-kafka's setting")
    add("--bootstrap-servers", default="127.0.0.1:9092")
    add("--topic-prefix", default="bench.fanout.")
    add("--no-devstack", action="store_true", help="don't run `devstack up kafka` first")
    add("--reuse-server", action="store_true", help="one server per target, not per scenario")
    add("--smoke", action="store_true", help="tiny sizes, --reuse-server, no quiet wait")
    add("--quiet-below", type=float, default=0.25, help="machine busy share to wait for")
    add("--quiet-timeout", type=float, default=120, help="max wait for it, seconds")
    add("--reference-long-poll-ms", type=int, default=15_000, help="its idle SSE keep-alive")
    add("--node-args", default="", help="extra node flags for the reference, e.g. --cpu-prof")
    add("--py-spy", metavar="BIN", help="profile durable-kafka's measured window with py-spy")
    add("--out", type=Path, default=RESULTS / "sse_fanout.json")
    add("--log-dir", type=Path, default=RESULTS / "logs")
    args = parser.parse_args(argv)
    if args.smoke:
        args.subscribers, args.big_subscribers, args.streams = 20, 50, 10
        args.warmup, args.duration, args.cooldown, args.drain_idle = 1, 3, 0.5, 2
        args.reuse_server, args.quiet_timeout = True, 0
    args.targets = [t for t in args.targets.split(",") if t]
    args.go_binary = fanout_gosub.build() if args.client == "go" else None
    args.run_tag = f"{int(time.time())}-{os.getpid()}"
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    known = scenarios(args)
    unknown = [s for s in args.scenarios.split(",") if s not in known]
    unknown += [t for t in args.targets if t not in targets.PROTOCOL_TARGETS]
    if unknown:
        log(f"unknown target or scenario: {', '.join(unknown)}")
        return 2
    chosen = [known[s] for s in args.scenarios.split(",")]
    run = preflight(args, chosen)
    dk = targets.TargetOptions(
        args.bootstrap_servers,
        args.topic_prefix,
        args.sse_max_duration_ms,
        args.reference_long_poll_ms,
        tuple(args.node_args.split()),
    )
    rows = [row for name in args.targets for row in run_target(name, chosen, args, dk)]
    ratio_rows = ratios(rows, targets.DURABLE_KAFKA, REFERENCES)
    print(table(rows, ratio_rows))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    document = {"run": run, "rows": [row.as_json() for row in rows], "ratios": ratio_rows}
    args.out.write_text(json.dumps(document, indent=2) + "\n")
    log(f"wrote {args.out}")
    return 1 if any(row.failure for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
