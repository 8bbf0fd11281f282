"""`python -m tests.faults [--seed N] [--only NAME ...]`: the long fault suite (`make faults`).

Starts its own 3-broker cluster in a temporary folder, runs every fault as its own scenario,
prints one line per fault and exits 1 if any reported an anomaly.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

from devstack import cluster
from tests.faults import faults, runner

LONG_LOAD_S = 10.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.faults", description=__doc__)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", nargs="*", choices=sorted(faults.ALL), default=None)
    parser.add_argument("--keep", type=Path, default=None, help="work here, and keep the logs")
    args = parser.parse_args(argv)
    failed = False
    with tempfile.TemporaryDirectory(prefix="durable-kafka-faults-") as tmp:
        home = args.keep or Path(tmp)
        try:
            cluster.start_cluster(home / "cluster")
            for name in args.only or list(faults.ALL):
                report = asyncio.run(
                    runner.run(
                        name, faults.ALL[name], home, args.seed, LONG_LOAD_S, faults.ENV.get(name)
                    )
                )
                print(report.line(), flush=True)
                if not report.ok:
                    failed = True
                    print(report.details(), flush=True)
        finally:
            cluster.stop_cluster(home / "cluster")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
