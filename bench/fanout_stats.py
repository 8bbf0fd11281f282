"""Figures of the SSE fan-out benchmark: merged latency histograms, result rows, ratios, table."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from bench.fanout_load import BUCKET_US


def merge(histograms: Iterable[Mapping[int, int]]) -> Counter[int]:
    merged: Counter[int] = Counter()
    for histogram in histograms:
        merged.update(histogram)
    return merged


def percentile_ms(histogram: Mapping[int, int], q: float, lost: int = 0) -> float | None:
    """The upper edge of the bucket holding the q-quantile, counting `lost` messages as later
    than any delivered one: None when the quantile falls among them (or without samples)."""
    total = sum(histogram.values()) + lost
    if total == 0:
        return None
    rank, seen = max(1, math.ceil(q * total)), 0
    for bucket in sorted(histogram):
        seen += histogram[bucket]
        if seen >= rank:
            return (bucket + 1) * BUCKET_US / 1000
    return None  # unreachable: the counts sum to total


@dataclass
class Row:
    """One target in one scenario."""

    target: str
    scenario: str
    subscribers: int
    streams: int
    rate: float
    measure_s: float
    code: str = ""  # the server's code version (durable-kafka's commit)
    connected: int = 0
    connect_s: float = 0.0
    delivered: int = 0
    expected: int = 0
    duplicates: int = 0
    errors: int = 0
    disconnects: int = 0
    never_connected: int = 0
    appends_sent: int = 0
    appends_ok: int = 0
    append_errors: int = 0
    append_p50_ms: float = 0.0
    append_p99_ms: float = 0.0
    appender_max_behind_ms: float = 0.0
    p50_ms: float | None = None
    p99_ms: float | None = None
    max_ms: float | None = None
    rss_before_kib: int = 0
    rss_connected_kib: int = 0
    rss_peak_kib: int = 0
    server_cpu: float = 0.0  # share of the machine (all cores) during the measured window
    loadgen_cpu: float = 0.0  # subscriber workers + appender, same unit
    busiest_worker_core: float = 0.0  # the busiest subscriber process, share of one core
    machine_cpu: float = 0.0
    # CPU per message delivered to one subscriber, from the window's start to the drain's end:
    # unlike latency, barely moved by other work on the machine.
    server_us_per_delivery: float | None = None
    loadgen_us_per_delivery: float | None = None
    background_cpu: float = 0.0  # the machine's busy share just before the scenario began
    reads_per_message: float | None = None  # subscriber network reads per message received
    worker_lag_p99_ms: float = 0.0
    worker_lag_max_ms: float = 0.0
    server_stop_s: float = 0.0
    error_samples: list[str] = field(default_factory=list)
    failure: str | None = None  # the scenario could not run to the end

    @property
    def rss_per_subscriber_kib(self) -> float:
        return (self.rss_peak_kib - self.rss_before_kib) / max(1, self.subscribers)

    def as_json(self) -> dict[str, object]:
        return {**self.__dict__, "rss_per_subscriber_kib": round(self.rss_per_subscriber_kib, 2)}


def ratios(rows: list[Row], target: str, references: Iterable[str]) -> list[dict[str, object]]:
    """`target` / each reference, per scenario, for p50, p99 and RSS per subscriber."""
    by_key = {(row.target, row.scenario): row for row in rows}
    out: list[dict[str, object]] = []
    for row in rows:
        if row.target != target:
            continue
        for reference in references:
            ref = by_key.get((reference, row.scenario))
            if ref is None:
                continue
            out.append(
                {
                    "scenario": row.scenario,
                    "versus": reference,
                    "p50": _ratio(row.p50_ms, ref.p50_ms),
                    "p99": _ratio(row.p99_ms, ref.p99_ms),
                    "server_cpu_per_delivery": _ratio(
                        row.server_us_per_delivery, ref.server_us_per_delivery
                    ),
                    "rss_per_subscriber": _ratio(
                        row.rss_per_subscriber_kib, ref.rss_per_subscriber_kib
                    ),
                }
            )
    return out


def _ratio(mine: float | None, theirs: float | None) -> float | None:
    if mine is None or theirs is None or theirs <= 0:
        return None
    return float(f"{mine / theirs:.2g}")  # two significant digits, however small


_COLUMNS = (
    ("target", 16),
    ("scenario", 10),
    ("subs", 6),
    ("delivered/expected", 20),
    ("appends ok/sent", 15),
    ("err/disc", 9),
    ("p50 ms", 8),
    ("p99 ms", 8),
    ("max ms", 8),
    ("RSS MiB before>peak", 20),
    ("KiB/sub", 8),
    ("srv us/msg", 10),
    ("srv CPU", 8),
    ("gen CPU", 8),
    ("box CPU", 8),
    ("idle box", 8),
)


def table(rows: list[Row], ratio_rows: list[dict[str, object]]) -> str:
    lines = [_line([name for name, _ in _COLUMNS])]
    lines += [_line(_cells(row)) for row in rows]
    if ratio_rows:
        lines += ["", "ratios durable-kafka / reference (below 1 = durable-kafka better):"]
        for ratio in ratio_rows:
            lines.append(
                f"  {ratio['scenario']:<10} vs {ratio['versus']:<17} p50 {_x(ratio['p50'])}"
                f"  p99 {_x(ratio['p99'])}  RSS/sub {_x(ratio['rss_per_subscriber'])}"
                f"  server CPU/msg {_x(ratio['server_cpu_per_delivery'])}"
            )
    return "\n".join(lines)


def _line(cells: list[str]) -> str:
    return "  ".join(cell.rjust(width) for cell, (_, width) in zip(cells, _COLUMNS, strict=True))


def _cells(row: Row) -> list[str]:
    return [
        row.target,
        row.scenario,
        str(row.subscribers),
        f"{row.delivered}/{row.expected}" + (" !" if row.failure else ""),
        f"{row.appends_ok}/{row.appends_sent}",
        f"{row.errors}/{row.disconnects}",
        _ms(row.p50_ms, row.expected),
        _ms(row.p99_ms, row.expected),
        _ms(row.max_ms, row.expected),
        f"{row.rss_before_kib / 1024:.0f}>{row.rss_peak_kib / 1024:.0f}",
        f"{row.rss_per_subscriber_kib:.1f}",
        _ms(row.server_us_per_delivery, 0),
        f"{row.server_cpu:.0%}",
        f"{row.loadgen_cpu:.0%}",
        f"{row.machine_cpu:.0%}",
        f"{row.background_cpu:.0%}",
    ]


def _ms(value: float | None, expected: int) -> str:
    """A latency; "lost" when it falls among undelivered messages."""
    if value is None:
        return "lost" if expected else "-"
    return f"{value:.1f}"


def _x(value: object) -> str:
    return "-" if value is None else f"{value}x"
