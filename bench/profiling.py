"""Where a server's CPU goes while measured: py-spy records it, and its stacks are summarised."""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from pathlib import Path


def record(py_spy: str, pid: int, duration_s: float, out: Path) -> subprocess.Popen[bytes]:
    """Sample the thread holding the GIL (Python CPU) of `pid` and of its children (the
    workers of `serve --workers`) for `duration_s`, raw stacks."""
    out.parent.mkdir(parents=True, exist_ok=True)
    command = [py_spy, "record", "--pid", str(pid), "--duration", str(max(1, round(duration_s)))]
    command += ["--rate", "100", "--gil", "--nonblocking", "--format", "raw", "--output", str(out)]
    command += ["--subprocesses"]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def finish(process: subprocess.Popen[bytes], stacks: Path, top: int = 30) -> Path | None:
    """Wait for the recording, then write `<stacks>.summary.txt`: the busiest frames."""
    try:
        process.wait(60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if not stacks.exists():
        return None
    summary = stacks.with_suffix(".summary.txt")
    summary.write_text(summarise(stacks.read_text(), top))
    return summary


def summarise(raw: str, top: int) -> str:
    """Share of samples per frame, inclusive (anywhere on the stack) and self (the leaf)."""
    inclusive: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    total = 0
    for line in records(raw):
        stack, _, count_text = line.rpartition(" ")
        count = int(count_text)
        frames = stack.split(";")
        total += count
        leaves[frames[-1]] += count
        inclusive.update(dict.fromkeys(set(frames), count))
    lines = [f"{total} samples of the thread holding the GIL", "", "inclusive:"]
    lines += [f"{n / total:7.1%}  {frame}" for frame, n in inclusive.most_common(top)]
    lines += ["", "self:"]
    lines += [f"{n / total:7.1%}  {frame}" for frame, n in leaves.most_common(top)]
    return "\n".join(lines) + "\n"


def records(raw: str) -> list[str]:
    """The lines of py-spy's raw output, a frame's name holding a line break joined back: each
    record ends with its count."""
    records: list[str] = []
    pending = ""
    for line in raw.splitlines():
        pending += line
        if COUNTED.search(pending):
            records.append(pending)
            pending = ""
    return records


COUNTED = re.compile(r" \d+$")
