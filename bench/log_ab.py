"""What the request log costs: closed-loop appends per second with the log at `info` (the
default: one line per request) against `warning` (no request lines), one server build.

Two durable-kafka processes run side by side, one per level, each warmed by an untimed run;
then runs alternate between them (the order flipping every pair), so the machine's other load
falls on both alike. Prints one JSON object: each run's rate and server CPU per append, each
pair's ratios (rate info / warning, CPU per append warning / info: on a saturated core both
are the share of throughput the log leaves), their medians and spread. A ratio of 0.95 is a
log costing 5 %. On a shared machine the rates swing with the neighbours' load; the server's
CPU per append much less.

    .venv/bin/python -m bench.log_ab --bootstrap-servers 127.0.0.1:9092 [--pairs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from bench import loadgen_run, targets
from devstack.process import listening_pids

LEVELS = ("info", "warning")


def main() -> None:
    args = _parser().parse_args()
    binary = loadgen_run.build()
    tag = uuid.uuid4().hex[:8]
    log_dir = Path(tempfile.mkdtemp(prefix="log-ab-"))
    servers = {level: _start(args, level, tag, log_dir) for level in LEVELS}
    runs = alternate(binary, args, servers)
    print(json.dumps(_summary(runs, args), indent=1))


def alternate(
    binary: Path, args: argparse.Namespace, servers: dict[str, targets.Server]
) -> dict[str, list[Run]]:
    """Each server warmed by an untimed run, then `args.pairs` pairs of runs, the order
    flipping every pair; every server stopped at the end."""
    names = list(servers)
    try:
        for name in names:  # a new bucket's first seconds are slow: not measured
            run(binary, args, servers[name], args.warmup + 2)
        runs: dict[str, list[Run]] = {name: [] for name in names}
        for pair in range(args.pairs):
            for name in names if pair % 2 == 0 else names[::-1]:
                runs[name].append(run(binary, args, servers[name], args.duration))
    finally:
        for server in servers.values():
            targets.stop(server)
    return runs


def _parser() -> argparse.ArgumentParser:
    parser = loadgen_run.load_parser(__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    return parser


def _start(args: argparse.Namespace, level: str, tag: str, log_dir: Path) -> targets.Server:
    prefix = f"bench.logab.{tag}.{level}."
    options = targets.TargetOptions(args.bootstrap_servers, prefix, 60_000, 0, log_level=level)
    return targets.start(targets.DURABLE_KAFKA, log_dir / level, options)


@dataclass(frozen=True)
class Run:
    rate: float  # appends answered 2xx per second
    cpu_us: float  # the server's CPU per such append
    broker_cpu_us: float | None = None  # the broker's (one on this machine), the runs alternating


def run(binary: Path, args: argparse.Namespace, server: targets.Server, seconds: float) -> Run:
    """One closed-loop append run of `seconds` against `server`: its rate and CPU per append,
    and the broker's when it runs on this machine (the process listening on the bootstrap
    port; the other build's server is idle meanwhile)."""
    flags: dict[str, object] = {"mode": "append", "base": server.url, "streams": args.streams}
    flags |= {"size": args.size, "create": True, "warmup": args.warmup, "duration": seconds}
    flags["server-pids"] = ",".join(str(pid) for pid in targets.process_tree(server.pid))
    brokers = listening_pids(int(args.bootstrap_servers.split(",")[0].rpartition(":")[2]))
    flags["broker-pids"] = ",".join(str(pid) for pid in sorted(brokers)) or None
    report = loadgen_run.run(binary, flags, timeout_s=300 + 4 * seconds).report
    ok = max(int(report["ok"]), 1)
    broker = report.get("broker_cpu_s")
    return Run(
        float(report["rate"]),
        float(report["server_cpu_s"]) / ok * 1e6,
        None if broker is None else round(float(broker) / ok * 1e6, 1),
    )


def _summary(runs: dict[str, list[Run]], args: argparse.Namespace) -> dict[str, object]:
    pairs = list(zip(runs["info"], runs["warning"], strict=True))
    rate = [info.rate / warning.rate for info, warning in pairs]
    cpu = [warning.cpu_us / info.cpu_us for info, warning in pairs]
    return {
        "streams": args.streams,
        "size": args.size,
        "seconds": args.duration,
        "runs": {level: [asdict(one) for one in runs[level]] for level in LEVELS},
        "rate_ratios": ratios(rate),
        "cpu_ratios": ratios(cpu),
    }


def ratios(each: list[float]) -> dict[str, object]:
    """Each pair's ratio, their median and spread."""
    return {
        "each": [round(ratio, 3) for ratio in each],
        "median": round(statistics.median(each), 3),
        "spread": [round(min(each), 3), round(max(each), 3)],
    }


if __name__ == "__main__":
    main()
