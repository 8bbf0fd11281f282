"""A per-second timeline of one append run from a fresh server start: where its first seconds go.

Each second it reads the server's `/metrics` (appends, transactions, the writer's produce and
commit stages) and the event-loop thread's CPU from /proc, and prints one row: appends/s,
appends per transaction, mean produce and commit ms, and the event loop's busy share. The
machine is shared, so compare rows within one run, and runs A/B alternating.

    .venv/bin/python -m bench.timeline --bootstrap-servers HOST:PORT --seconds 40 --streams 100
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from bench import loadgen_run, targets

APPENDS = "durable_kafka_append_duration_seconds_count"
STAGE = 'durable_kafka_kafka_duration_seconds_{}{{stage="{}"}}'


@dataclass(frozen=True)
class Sample:
    """Cumulative counters at one instant."""

    at: float
    appends: float
    transactions: float
    produce_s: float
    commit_s: float
    loop_cpu_s: float


@dataclass(frozen=True)
class Row:
    """One second of the run, from two samples."""

    second: int
    appends_per_s: float
    appends_per_transaction: float
    produce_ms: float
    commit_ms: float
    loop_busy: float


def parse_metrics(text: str) -> dict[str, float]:
    """The Prometheus text format's samples, by their name and labels as written."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


def sample_of(metrics: dict[str, float], at: float, loop_cpu_s: float) -> Sample:
    return Sample(
        at=at,
        appends=metrics.get(APPENDS, 0.0),
        transactions=metrics.get(STAGE.format("count", "produce"), 0.0),
        produce_s=metrics.get(STAGE.format("sum", "produce"), 0.0),
        commit_s=metrics.get(STAGE.format("sum", "commit"), 0.0),
        loop_cpu_s=loop_cpu_s,
    )


def row(second: int, before: Sample, after: Sample) -> Row:
    """What happened between two samples, per second and per transaction."""
    elapsed = max(after.at - before.at, 1e-9)
    transactions = after.transactions - before.transactions
    appends = after.appends - before.appends
    per = max(transactions, 1.0)
    return Row(
        second=second,
        appends_per_s=round(appends / elapsed, 1),
        appends_per_transaction=round(appends / per, 1),
        produce_ms=round(1000 * (after.produce_s - before.produce_s) / per, 2),
        commit_ms=round(1000 * (after.commit_s - before.commit_s) / per, 2),
        loop_busy=round((after.loop_cpu_s - before.loop_cpu_s) / elapsed, 3),
    )


def thread_cpu_s(pid: int) -> float:
    """CPU seconds of a process's main thread: the one running the event loop."""
    fields = Path(f"/proc/{pid}/task/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / targets.CLK_TCK


def take(ops_url: str, pid: int) -> Sample:
    with urllib.request.urlopen(f"{ops_url}/metrics", timeout=5) as response:
        text = response.read().decode()
    return sample_of(parse_metrics(text), time.monotonic(), thread_cpu_s(pid))


def serve(args: argparse.Namespace, log: Path) -> subprocess.Popen[bytes]:
    command = [str(Path(sys.executable).parent / "durable-kafka"), "serve"]
    command += ["--listen", f"127.0.0.1:{args.port}", "--ops-listen", f"127.0.0.1:{args.ops_port}"]
    command += ["--bootstrap-servers", args.bootstrap_servers]
    prefix = args.topic_prefix or f"timeline-{uuid.uuid4().hex[:8]}-"
    command += ["--topic-prefix", prefix, "--log-level", args.log_level]
    with log.open("ab") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)


def wait_ready(url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/readyz", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{url} not ready in {timeout_s:g} s")


def run(args: argparse.Namespace) -> list[Row]:
    """A fresh server, its streams created, then `seconds` of closed-loop appends, sampled."""
    server = serve(args, Path(args.log))
    try:
        base, ops = f"http://127.0.0.1:{args.port}", f"http://127.0.0.1:{args.ops_port}"
        wait_ready(base, 120)
        binary = str(loadgen_run.build())
        flags = ["-streams", str(args.streams), "-size", str(args.size), "-warmup", "0"]
        create = [binary, "-mode", "create", "-base", base, "-count", str(args.streams)]
        subprocess.run(create, check=True, capture_output=True, timeout=120)
        time.sleep(args.pause)
        load = [binary, "-base", base, *flags, "-duration", str(args.seconds)]
        rows: list[Row] = []
        for _ in range(args.runs):
            rows += _sampled(load, ops, server.pid, args.seconds, len(rows))
        return rows
    finally:
        server.terminate()
        server.wait(30)


def _sampled(load: list[str], ops: str, pid: int, seconds: int, first: int) -> list[Row]:
    """One load generator run, a row per second (numbered on from `first`)."""
    loadgen = subprocess.Popen(load, stdout=subprocess.DEVNULL)
    rows, before = [], take(ops, pid)
    for second in range(first + 1, first + seconds + 1):
        time.sleep(max(0.0, before.at + 1 - time.monotonic()))
        after = take(ops, pid)
        rows.append(row(second, before, after))
        print(json.dumps(asdict(rows[-1])), flush=True)
        before = after
    loadgen.wait(60)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--seconds", type=int, default=40)
    parser.add_argument("--runs", type=int, default=1, help="back to back on one server")
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--port", type=int, default=18421)
    parser.add_argument("--ops-port", type=int, default=18422)
    parser.add_argument("--log", default="/tmp/timeline-server.log")
    parser.add_argument("--log-level", default="warning")
    parser.add_argument("--pause", type=float, default=0, help="seconds idle before the load")
    parser.add_argument("--topic-prefix", help="reuse these topics (default: new ones)")
    run(parser.parse_args())


if __name__ == "__main__":
    main()
