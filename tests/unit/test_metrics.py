"""The instruments: a request answered is counted and timed under its own labels."""

from __future__ import annotations

from adapter.metrics import Metrics


def _count(metrics: Metrics, status: str) -> float | None:
    labels = {"method": "POST", "route": "/v1/stream/{path}", "status": status}
    return metrics.registry.get_sample_value("durable_kafka_http_requests_total", labels)


def _timed(metrics: Metrics, status_class: str) -> float | None:
    labels = {"method": "POST", "route": "/v1/stream/{path}", "status_class": status_class}
    return metrics.registry.get_sample_value(
        "durable_kafka_http_request_duration_seconds_count", labels
    )


def test_each_answer_is_counted_and_timed_under_its_labels() -> None:
    metrics = Metrics()
    for status in (204, 204, 404):
        metrics.answered("POST", "/v1/stream/{path}", status, 0.002)
    assert _count(metrics, "204") == 2
    assert _count(metrics, "404") == 1
    assert _timed(metrics, "2xx") == 2
    assert _timed(metrics, "4xx") == 1


def test_instances_keep_their_own_series() -> None:
    first, second = Metrics(), Metrics()
    first.answered("POST", "/v1/stream/{path}", 204, 0.002)
    second.answered("POST", "/v1/stream/{path}", 204, 0.002)
    assert _count(first, "204") == 1
    assert _count(second, "204") == 1


def test_kafka_stages_are_timed_under_their_own_label() -> None:
    metrics = Metrics()
    metrics.kafka_timing("produce", 0.003)
    metrics.kafka_timing("commit", 0.002)
    metrics.kafka_timing("commit", 0.004)
    seconds = "durable_kafka_kafka_duration_seconds_count"
    assert metrics.registry.get_sample_value(seconds, {"stage": "produce"}) == 1
    assert metrics.registry.get_sample_value(seconds, {"stage": "commit"}) == 2


def test_each_readiness_check_is_a_series() -> None:
    metrics = Metrics()
    states = {"kafka": True, "object_store": False}
    metrics.watch_checks(lambda: states)
    ok = "durable_kafka_check_ok"
    assert metrics.registry.get_sample_value(ok, {"check": "kafka"}) == 1
    assert metrics.registry.get_sample_value(ok, {"check": "object_store"}) == 0
    states["object_store"] = True  # read at each scrape
    assert metrics.registry.get_sample_value(ok, {"check": "object_store"}) == 1


def test_the_process_collectors_report_this_process() -> None:
    """`process_*` read /proc/self: a worker of `serve --workers N` reports itself."""
    metrics = Metrics()
    assert (metrics.registry.get_sample_value("process_resident_memory_bytes") or 0) > 0
    assert metrics.registry.get_sample_value("process_start_time_seconds") is not None
    assert metrics.registry.get_sample_value("python_info", _python_info()) == 1


def test_write_slots_are_read_at_each_scrape() -> None:
    metrics = Metrics()
    owned = {1, 2, 3}
    metrics.watch_write_slots(8, lambda: len(owned), lambda: 2)
    assert metrics.registry.get_sample_value("durable_kafka_write_slots") == 8
    assert metrics.registry.get_sample_value("durable_kafka_write_slots_owned") == 3
    owned.discard(3)
    assert metrics.registry.get_sample_value("durable_kafka_write_slots_owned") == 2
    assert metrics.registry.get_sample_value("durable_kafka_write_slots_ready") == 2


def _python_info() -> dict[str, str]:
    import platform

    major, minor, patch = platform.python_version_tuple()
    return {
        "implementation": platform.python_implementation(),
        "major": major,
        "minor": minor,
        "patchlevel": patch,
        "version": platform.python_version(),
    }
