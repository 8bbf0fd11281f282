"""What a change to the server costs or saves: closed-loop appends per second and the server's
CPU per append, this checkout against another build of durable-kafka (`--base`: a checkout
with its own `.venv`, e.g. a worktree of the commit before the change).

Two durable-kafka processes run side by side on one broker, one per build, each warmed by an
untimed run; then runs alternate between them (the order flipping every pair), so the
machine's other load falls on both alike (as in `bench/log_ab.py`). Prints one JSON object:
each run's rate and server CPU per append, each pair's ratios (rate this / base, CPU per
append this / base: below 1 is cheaper), their medians and spread, and the load average
before and after. On a shared machine the rates swing with the neighbours' load; the
server's CPU per append much less.

    .venv/bin/python -m bench.build_ab --bootstrap-servers 127.0.0.1:9092 --base ../base [--pairs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import uuid
from dataclasses import asdict
from pathlib import Path

from bench import loadgen_run, targets
from bench.log_ab import Run, alternate, ratios

BUILDS = ("this", "base")


def main() -> None:
    args = _parser().parse_args()
    binary = loadgen_run.build()
    tag = uuid.uuid4().hex[:8]
    log_dir = Path(tempfile.mkdtemp(prefix="build-ab-"))
    checkouts = {"this": targets.REPO, "base": Path(args.base).resolve()}
    load_before = os.getloadavg()
    servers = {build: _start(args, build, checkouts[build], tag, log_dir) for build in BUILDS}
    runs = alternate(binary, args, servers)
    summary = _summary(runs, args, checkouts)
    summary["load_average"] = {"before": load_before, "after": os.getloadavg()}
    print(json.dumps(summary, indent=1))


def _parser() -> argparse.ArgumentParser:
    parser = loadgen_run.load_parser(__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the other checkout (with its .venv)")
    parser.add_argument("--pairs", type=int, default=5)
    return parser


def _start(
    args: argparse.Namespace, build: str, checkout: Path, tag: str, log_dir: Path
) -> targets.Server:
    prefix = f"bench.buildab.{tag}.{build}."
    options = targets.TargetOptions(args.bootstrap_servers, prefix, 60_000, 0, checkout=checkout)
    return targets.start(targets.DURABLE_KAFKA, log_dir / build, options)


def _summary(
    runs: dict[str, list[Run]], args: argparse.Namespace, checkouts: dict[str, Path]
) -> dict[str, object]:
    pairs = list(zip(runs["this"], runs["base"], strict=True))
    return {
        "checkouts": {build: str(path) for build, path in checkouts.items()},
        "streams": args.streams,
        "size": args.size,
        "seconds": args.duration,
        "runs": {build: [asdict(one) for one in runs[build]] for build in BUILDS},
        "rate_ratios": ratios([this.rate / base.rate for this, base in pairs]),
        "cpu_ratios": ratios([this.cpu_us / base.cpu_us for this, base in pairs]),
    } | _broker_ratios(pairs)


def _broker_ratios(pairs: list[tuple[Run, Run]]) -> dict[str, object]:
    """The broker's CPU per append, this / base, when every run measured it."""
    each = [(this.broker_cpu_us, base.broker_cpu_us) for this, base in pairs]
    if not all(this and base for this, base in each):
        return {}
    return {"broker_cpu_ratios": ratios([this / base for this, base in each if this and base])}


if __name__ == "__main__":
    main()
