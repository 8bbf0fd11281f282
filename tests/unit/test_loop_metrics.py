"""The lock-free families render exactly what prometheus_client's instruments would."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, cast

import pytest
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    enable_created_metrics,
    generate_latest,
)

from adapter.loop_metrics import CounterTally, HistogramTally

# prometheus_client's switch for `_created` series (untyped there).
_disable_created = cast(Callable[[], None], disable_created_metrics)
_enable_created = cast(Callable[[], None], enable_created_metrics)
BUCKETS = (0.001, 0.01, 0.1, 1)
SECONDS = (0.0005, 0.001, 0.002, 0.01, 0.5, 2.0, 30.0, 0.0)
_CREATED = re.compile(rb"(_created(?:\{[^}]*\})?) [0-9.e+]+")


def _text(registry: CollectorRegistry) -> bytes:
    """The exposition, with the `_created` times (when each series was made) left out."""
    return _CREATED.sub(rb"\1 T", generate_latest(registry))


def _labelled(registry: CollectorRegistry, tally: bool) -> tuple[Any, Any]:
    counter = CounterTally if tally else Counter
    histogram = HistogramTally if tally else Histogram
    return (
        counter("x_requests", "Requests.", ["method", "status"], registry=registry),
        histogram("x_seconds", "Time.", ["method"], buckets=BUCKETS, registry=registry),
    )


def test_labelled_families_render_as_prometheus_client_does() -> None:
    rendered = []
    for tally in (False, True):
        registry = CollectorRegistry(auto_describe=True)
        requests, seconds = _labelled(registry, tally)
        requests.labels("GET", "200")  # a series made before it counts is exported at 0
        for index, value in enumerate(SECONDS):
            method = "POST" if index % 3 else "GET"
            requests.labels(method, str(200 + index % 2)).inc()
            seconds.labels(method).observe(value)
        requests.labels("PUT", "201").inc(2.5)
        rendered.append(_text(registry))
    assert rendered[0] == rendered[1]
    assert b'x_seconds_bucket{le="+Inf",method="POST"} 5.0' in rendered[1]
    assert b'x_requests_created{method="GET",status="200"} T' in rendered[1]


def test_unlabelled_families_render_as_prometheus_client_does() -> None:
    rendered = []
    for tally in (False, True):
        registry = CollectorRegistry(auto_describe=True)
        counter = CounterTally if tally else Counter
        histogram = HistogramTally if tally else Histogram
        seconds = histogram("y_seconds", "Time.", buckets=BUCKETS, registry=registry)
        written = counter("y_bytes", "Bytes.", registry=registry)
        empty = counter("y_empty", "Never counted.", ["code"], registry=registry)
        for value in SECONDS:
            seconds.observe(value)
            written.inc(100)
        assert empty is not None
        rendered.append(_text(registry))
    assert rendered[0] == rendered[1]
    assert b"y_bytes_total 800.0" in rendered[1]


def test_without_created_series_as_prometheus_client_without_them() -> None:
    _disable_created()
    try:
        rendered = []
        for tally in (False, True):
            registry = CollectorRegistry(auto_describe=True)
            requests, seconds = _labelled(registry, tally)
            requests.labels("GET", "200").inc()
            seconds.labels("GET").observe(0.002)
            rendered.append(generate_latest(registry))
    finally:
        _enable_created()
    assert rendered[0] == rendered[1]
    assert b"_created" not in rendered[1]


def test_a_name_is_registered_once() -> None:
    registry = CollectorRegistry(auto_describe=True)
    CounterTally("z_requests", "Requests.", registry=registry)
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        Counter("z_requests", "Requests again.", registry=registry)
