"""`python -m tests.faults [--seed N] [--only NAME ...] [--workers N]`: the long fault suite
(`make faults`).

Starts its own 3-broker cluster and its own MinIO (the adapters' cold tier) in a temporary
folder, runs every fault as its own scenario, prints one line per fault and exits 1 if any
reported an anomaly.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

from devstack import cluster
from devstack.process import ServiceError
from tests.adapter_process import WORKERS
from tests.faults import faults, runner, store

LONG_LOAD_S = 10.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.faults", description=__doc__)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", nargs="*", choices=sorted(faults.ALL), default=None)
    parser.add_argument("--keep", type=Path, default=None, help="work here, and keep the logs")
    parser.add_argument(
        "--workers", type=int, default=None, help="serve --workers N for the two adapters"
    )
    args = parser.parse_args(argv)
    failed = False
    with tempfile.TemporaryDirectory(prefix="durable-kafka-faults-") as tmp:
        home = args.keep or Path(tmp)
        try:
            cluster.start_cluster(home / "cluster")
            store.start(home)
            several = (args.workers or int(WORKERS[1])) > 1
            every = [n for n in faults.ALL if several or n not in faults.NEEDS_WORKERS]
            for name in args.only or every:
                failed = not _scenario(name, home, args.seed, args.workers) or failed
        finally:
            store.stop(home)
            cluster.stop_cluster(home / "cluster")
    return 1 if failed else 0


def _scenario(name: str, home: Path, seed: int, workers: int | None) -> bool:
    """Run one fault and print its line; one that could not finish (the instances never
    settled, say) is a failure too, and the next fault still runs."""
    faulty = faults.ENV.get(name)
    three, relayed = name in faults.THREE, name in faults.RELAYED
    scenario = runner.run(
        name, faults.ALL[name], home, seed, LONG_LOAD_S, faulty, workers, three, relayed
    )
    try:
        report = asyncio.run(scenario)
    except (AssertionError, ServiceError, TimeoutError) as error:
        print(f"{name}: did not finish: {str(error)[:2000]}", flush=True)
        return False
    print(report.line(), flush=True)
    if not report.ok:
        print(report.details(), flush=True)
    return report.ok


if __name__ == "__main__":
    sys.exit(main())
