"""The suite's output: the figures table, the ratios from the same run, and the goals."""

from __future__ import annotations

from typing import Any

from bench import targets
from bench.suite_measure import RAW_KAFKA
from bench.suite_scenarios import LATENCY, MBPS, RATE

OTHERS = (targets.REFERENCE_MEMORY, targets.REFERENCE_FILE, RAW_KAFKA, *targets.FLOORS)
HEADLINE = {LATENCY: "p50_ms", RATE: "rate", MBPS: "mb_per_s"}
# Server CPU µs per operation of these targets, shown beside durable-kafka's.
CPU_BESIDE = {
    "reference_cpu_us_per_op": targets.REFERENCE_MEMORY,
    "kafka_floor_cpu_us_per_op": targets.PYTHON_KAFKA_FLOOR,
}


def _num(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}" if abs(value) < 100 else f"{value:,.0f}"


def _ratio(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2g}" if value < 0.1 else _num(value, 2)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def figure(row: dict[str, Any]) -> str:
    m = row["median"]
    if row["failure"] and not row["reps"]:
        return "FAILED"
    if row["metric"] == RATE:
        return f"{_num(m['rate'])}/s (p50 {_num(m['p50_ms'])}, p99 {_num(m['p99_ms'])} ms)"
    if row["metric"] == MBPS:
        return f"{_num(m['mb_per_s'])} MB/s"
    return f"p50 {_num(m['p50_ms'], 2)} / p99 {_num(m['p99_ms'], 2)} ms"


def table(rows: list[dict[str, Any]]) -> str:
    head = "| scenario | target | figure (median of reps) | ok / errors | RSS peak MiB "
    head += "| server CPU | server CPU µs/op | loadgen CPU | machine busy |"
    lines = [head, "|" + "---|" * 9]
    for row in sorted(rows, key=lambda r: r["scenario"]):
        m = row["median"]
        rss = row["rss_peak_kib"]
        lines.append(
            f"| {row['scenario']} | {row['target']} | {figure(row)} | "
            f"{row['ok']:,} / {row['errors']:,} | {_num(rss / 1024 if rss else None)} | "
            f"{_pct(m['server_cpu'])} | {_num(m['server_cpu_us_per_op'])} | "
            f"{_pct(m['loadgen_cpu'])} | {_pct(m['machine_busy'])} |"
            + (f" {row['failure']}" if row["failure"] else "")
        )
    return "\n".join(lines)


def ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """durable-kafka's headline figure / each other target's, per scenario (same run)."""
    by_key = {(r["scenario"], r["target"]): r for r in rows if r["reps"]}
    out = []
    for (scenario, target), row in sorted(by_key.items()):
        if not target.startswith(targets.DURABLE_KAFKA):
            continue
        key = HEADLINE[row["metric"]]
        entry: dict[str, Any] = {"scenario": scenario, "target": target, "figure": key}
        entry["cpu_us_per_op"] = row["median"]["server_cpu_us_per_op"]
        for field, other in CPU_BESIDE.items():
            theirs = by_key.get((scenario, other))
            entry[field] = theirs["median"]["server_cpu_us_per_op"] if theirs else None
        for other in OTHERS:
            theirs = by_key.get((scenario, other))
            mine, their = row["median"][key], theirs["median"][key] if theirs else None
            entry[other] = round(mine / their, 3) if mine is not None and their else None
            if row["metric"] == LATENCY and theirs:
                p99, their99 = row["median"]["p99_ms"], theirs["median"]["p99_ms"]
                entry[f"{other} p99"] = round(p99 / their99, 3) if p99 and their99 else None
        out.append(entry)
    return out


def ratio_table(entries: list[dict[str, Any]]) -> str:
    lines = [
        "| scenario | durable-kafka target | figure | / ref memory | / ref file | / raw Kafka "
        "| / Python floor | / Python+Kafka floor | server CPU µs/op | ref memory's "
        "| Python+Kafka floor's |"
    ]
    lines.append("|" + "---|" * 11)
    for e in entries:
        cells = [_ratio(e.get(other)) for other in OTHERS]
        cells += [_num(e.get(k)) for k in ("cpu_us_per_op", *CPU_BESIDE)]
        lines.append(
            f"| {e['scenario']} | {e['target']} | {e['figure']} | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines)
