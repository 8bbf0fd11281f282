"""Which targets the suite runs each scenario against."""

from __future__ import annotations

from bench import targets
from bench.suite import parse_args
from bench.suite_report import ratio_table, ratios
from bench.suite_scenarios import catalogue

FLOOR_SCENARIOS = {
    "append-100-streams",
    "append-1000-streams",
    "append-hot-stream",
    "append-moderate",
}


def test_the_python_floors_run_only_the_plain_append_scenarios() -> None:
    every = catalogue(parse_args([]))
    for floor in targets.FLOORS:
        assert {s.name for s in every if s.runs_on(floor)} == FLOOR_SCENARIOS
    ran = {s.name for s in every if s.runs_on(targets.DURABLE_KAFKA)}
    assert ran > FLOOR_SCENARIOS
    assert "kafka-txn-commit" not in ran  # raw Kafka's only
    assert {s.name for s in every if s.runs_on(targets.REFERENCE_MEMORY)} == ran


def test_durable_kafkas_rate_is_reported_against_each_floor() -> None:
    def row(target: str, rate: float, cpu: float) -> dict[str, object]:
        median = {"rate": rate, "server_cpu_us_per_op": cpu}
        return {"scenario": "append-100-streams", "target": target, "metric": "rate"} | {
            "reps": [median],
            "median": median,
        }

    rows = [
        row(targets.DURABLE_KAFKA, 2_000, 450),
        row(targets.PYTHON_FLOOR, 18_000, 51),
        row(targets.PYTHON_KAFKA_FLOOR, 8_000, 100),
    ]
    [entry] = ratios(rows)
    assert entry[targets.PYTHON_FLOOR] == 0.111
    assert entry[targets.PYTHON_KAFKA_FLOOR] == 0.25
    assert entry["kafka_floor_cpu_us_per_op"] == 100
    assert "| 0.11 | 0.25 | 450 | - | 100 |" in ratio_table([entry])
