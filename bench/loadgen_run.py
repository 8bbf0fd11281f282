"""The compiled load generator (bench/loadgen, Go): built once into the cache, run as a process."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import gobuild, targets

SOURCE = targets.REPO / "bench" / "loadgen"


class LoadgenError(RuntimeError):
    """The generator did not finish, or printed no report."""


def build(cache: Path = gobuild.CACHE) -> Path:
    return gobuild.build(SOURCE, "loadgen", cache)


@dataclass
class Outcome:
    """The generator's report plus the wall time of its whole process."""

    report: dict[str, Any]
    wall_s: float

    @property
    def cpu_share(self) -> float:
        """The generator's CPU while measured, as a share of all the machine's cores."""
        seconds = float(self.report.get("seconds") or 0)
        cpu = float(self.report.get("cpu_s") or 0)
        return cpu / seconds / (os.cpu_count() or 1) if seconds > 0 else 0.0


def run(binary: Path, options: dict[str, object], timeout_s: float) -> Outcome:
    """Run the generator with `-key value` flags (True: a bare flag); its JSON report."""
    command = [str(binary)]
    for key, value in options.items():
        if value is True:
            command.append(f"-{key}")
        elif value is not False and value is not None:
            command += [f"-{key}", str(value)]
    started = time.monotonic()
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired as error:
        raise LoadgenError(f"loadgen did not finish in {timeout_s:g} s: {command}") from error
    if done.returncode != 0 or not done.stdout.strip():
        raise LoadgenError(f"loadgen exited {done.returncode}: {done.stderr.strip()[:500]}")
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return Outcome(report, time.monotonic() - started)


def load_parser(description: str) -> argparse.ArgumentParser:
    """The options of a closed-loop append load against one broker, shared by the benchmarks
    that run one (`--streams` writers of `--size`-byte appends, after `--warmup` s, for
    `--duration` s)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--warmup", type=float, default=2)
    parser.add_argument("--duration", type=float, default=10)
    return parser
