"""The timeline's arithmetic: one row per second from two samples of the server's counters."""

from __future__ import annotations

from bench.timeline import Row, Sample, parse_metrics, row, sample_of

METRICS = """\
# HELP durable_kafka_append_duration_seconds Appends.
durable_kafka_append_duration_seconds_count 1200.0
durable_kafka_kafka_duration_seconds_count{stage="produce"} 100.0
durable_kafka_kafka_duration_seconds_sum{stage="produce"} 2.0
durable_kafka_kafka_duration_seconds_count{stage="commit"} 100.0
durable_kafka_kafka_duration_seconds_sum{stage="commit"} 0.5
"""


def test_a_sample_reads_appends_transactions_and_stage_seconds() -> None:
    sample = sample_of(parse_metrics(METRICS), at=10.0, loop_cpu_s=3.0)
    assert sample == Sample(10.0, 1200.0, 100.0, 2.0, 0.5, 3.0)


def test_a_missing_series_counts_as_zero() -> None:
    assert sample_of({}, at=0.0, loop_cpu_s=0.0) == Sample(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


def test_a_row_is_per_second_and_per_transaction() -> None:
    before = Sample(
        at=10.0, appends=1000, transactions=100, produce_s=1, commit_s=0.5, loop_cpu_s=2
    )
    after = Sample(
        at=12.0, appends=1800, transactions=120, produce_s=1.4, commit_s=0.6, loop_cpu_s=3
    )
    assert row(3, before, after) == Row(
        second=3,
        appends_per_s=400.0,
        appends_per_transaction=40.0,
        produce_ms=20.0,
        commit_ms=5.0,
        loop_busy=0.5,
    )


def test_a_second_without_a_transaction_divides_by_one() -> None:
    idle = Sample(at=0.0, appends=5, transactions=7, produce_s=1, commit_s=1, loop_cpu_s=0)
    later = Sample(at=1.0, appends=5, transactions=7, produce_s=1, commit_s=1, loop_cpu_s=0.25)
    assert row(1, idle, later) == Row(1, 0.0, 0.0, 0.0, 0.0, 0.25)
