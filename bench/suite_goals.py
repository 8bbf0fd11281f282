"""The suite's goals, checked against one run's figures (reported, never asserted)."""

from __future__ import annotations

from typing import Any

from bench import targets
from bench.suite_measure import RAW_KAFKA

DK, MEM, FILE = targets.DURABLE_KAFKA, targets.REFERENCE_MEMORY, targets.REFERENCE_FILE


def _median(rows: list[dict[str, Any]], scenario: str, target: str, key: str) -> float | None:
    for row in rows:
        if row["scenario"] == scenario and row["target"] == target and row["reps"]:
            value = row["median"][key]
            return None if value is None else float(value)
    return None


def _errors(rows: list[dict[str, Any]], scenario: str, target: str) -> int | None:
    found = [
        r["errors"]
        for r in rows
        if r["scenario"] == scenario and r["target"] == target and r["reps"]
    ]
    return int(found[0]) if found else None


def _goal(name: str, value: float | None, bound: float, above: bool, unit: str) -> dict[str, Any]:
    met = None if value is None else (value >= bound if above else value <= bound)
    return {"goal": name, "value": value, "bound": bound, "unit": unit, "met": met}


def fanout_goal(fanout: dict[str, Any] | None) -> dict[str, Any]:
    """SSE fan-out to 1,000 subscribers of one stream: p99 delivery under 50 ms."""
    found = [
        r
        for r in (fanout or {}).get("rows", [])
        if r.get("target") == DK and r.get("scenario") == "one"
    ]
    p99 = found[0].get("p99_ms") if found else None
    name = f"SSE fan-out p99, {found[0]['subscribers']:,} subscribers" if found else "SSE fan-out"
    return _goal(name, None if p99 is None else float(p99), 50.0, False, "ms")


def goals(
    rows: list[dict[str, Any]], small: int, many: int, memory: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    out = []
    for streams in (small, many):
        scenario = f"append-{streams}-streams"
        dk = _median(rows, scenario, DK, "rate")
        for other, bound in ((FILE, 2.0), (MEM, 1.0), (RAW_KAFKA, 0.5)):
            theirs = _median(rows, scenario, other, "rate")
            ratio = dk / theirs if dk is not None and theirs else None
            out.append(_goal(f"{scenario}: durable-kafka / {other}", ratio, bound, True, "x"))
    for scenario in (f"append-{small}-streams", f"append-{many}-streams", "append-hot-stream"):
        cpu = _median(rows, scenario, DK, "server_cpu_us_per_op")
        out.append(_goal(f"{scenario}: adapter CPU per append", cpu, 100.0, False, "µs"))
    errors = _errors(rows, f"append-{many}-streams", DK)
    out.append(_goal(f"append-{many}-streams: request errors", errors, 0, False, "errors"))
    dk_p50 = _median(rows, "append-latency", DK, "p50_ms")
    txn_p50 = _median(rows, "kafka-txn-commit", RAW_KAFKA, "p50_ms")
    gap = dk_p50 - txn_p50 if dk_p50 is not None and txn_p50 is not None else None
    out.append(_goal("append p50 - Kafka transaction p50", gap, 2.0, False, "ms"))
    p99 = _median(rows, "append-moderate", DK, "p99_ms")
    out.append(_goal("append p99 at moderate load", p99, 20.0, False, "ms"))
    mbps = _median(rows, "catchup-read", DK, "mb_per_s")
    out.append(_goal("catch-up read", mbps, 100.0, True, "MB/s"))
    sse = _median(rows, "sse-first-event", DK, "p50_ms")
    out.append(_goal("SSE first event p50", sse, 10.0, False, "ms"))
    out += memory_goals(memory)
    return out


def memory_goals(memory: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """RSS growth from the first point to the one at 100,000 streams (or the last below it):
    at most 20 %; and at 1,000,000 streams at most 512 MiB (not measured unless reached)."""
    out = []
    for result in memory:
        points = [p for p in result["points"] if p["streams"] <= 100_000]
        if result["target"] != DK or len(points) < 2:
            continue
        first, last = points[0], points[-1]
        growth = last["rss_kib"] / first["rss_kib"] - 1 if first["rss_kib"] else None
        name = f"RSS growth {first['streams']:,} -> {last['streams']:,} streams"
        out.append(_goal(name, growth, 0.2, False, "share"))
        million = [p["rss_kib"] / 1024 for p in result["points"] if p["streams"] >= 1_000_000]
        rss = million[0] if million else None
        out.append(_goal("RSS at 1,000,000 streams", rss, 512, False, "MiB"))
    return out


def goal_table(entries: list[dict[str, Any]]) -> str:
    lines = ["| goal | value | bound | met |", "|---|---|---|---|"]
    for e in entries:
        value = "-" if e["value"] is None else f"{e['value']:,.2f} {e['unit']}"
        met = {True: "yes", False: "**no**", None: "not measured"}[e["met"]]
        sign = ">=" if e["unit"] in ("x", "MB/s") else "<="
        lines.append(f"| {e['goal']} | {value} | {sign} {e['bound']:g} | {met} |")
    return "\n".join(lines)
