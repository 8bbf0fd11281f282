"""Counters and histograms counted as plain numbers, exported as prometheus_client's would be.

prometheus_client's instruments take a lock on every `inc` and `observe` (a histogram three:
its sum, its bucket and the check that it may be observed): on the request path that is a
few µs of the event loop's one core per request. The families here are counted only on the
event loop's thread, with no lock, and render at scrape time the samples, labels, order and
`_created` series that a `Counter` or `Histogram` of the same name would
(`tests/unit/test_loop_metrics.py` compares the two). An instrument fed from another thread (the
Kafka writer's) stays a prometheus_client one.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from typing import Generic, TypeVar, cast

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import INF, floatToGoString

S = TypeVar("S")

# The `le` label of a bound as prometheus_client spells it ("0.005", "+Inf").
_le_label = cast(Callable[[float], str], floatToGoString)


def _export_created() -> bool:
    """Whether `_created` series are exported: the library's own switch
    (`PROMETHEUS_DISABLE_CREATED_SERIES`, `disable_created_metrics()`). prometheus_client has
    no public getter for it, so an unregistered counter is asked: it has a `_created` sample
    exactly when the switch is on. Once a scrape, a few µs."""
    probe = Counter("probe", "whether counters export _created", registry=None)
    return any(
        sample.name == "probe_created" for family in probe.collect() for sample in family.samples
    )


class Count:
    """One counter series."""

    __slots__ = ("created", "value")

    def __init__(self) -> None:
        self.value = 0.0
        self.created = time.time()

    def inc(self, amount: float = 1) -> None:
        self.value += amount


class Spread:
    """One histogram series: how many observations fell in each bucket, and their sum."""

    __slots__ = ("bounds", "counts", "created", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = bounds
        self.counts = [0] * len(bounds)
        self.sum = 0.0
        self.created = time.time()

    def observe(self, amount: float) -> None:
        """As `Histogram.observe`: the first bucket whose bound is at least `amount`."""
        self.sum += amount
        self.counts[bisect_left(self.bounds, amount)] += 1


class _Family(Collector, Generic[S]):
    """A family of series by label values: `labels(*values)` is its series (made on first
    use); an unlabelled family has its one series from the start."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.name, self.documentation, self.labelnames = name, documentation, tuple(labelnames)
        self._series: dict[tuple[str, ...], S] = {}
        self._only = None if labelnames else self.labels()
        if registry is not None:
            registry.register(self)

    def _new(self) -> S:
        raise NotImplementedError

    def labels(self, *values: str) -> S:
        series = self._series.get(values)
        if series is None:
            series = self._series[values] = self._new()
        return series

    def _empty(self) -> Metric:
        """The family with no samples yet."""
        raise NotImplementedError

    def describe(self) -> Iterable[Metric]:
        return [self._empty()]

    def _the_one(self) -> S:
        assert self._only is not None, "a labelled family counts through labels()"
        return self._only


class CounterTally(_Family[Count]):
    """A `Counter` family; unlabelled, it counts with `inc`."""

    def _new(self) -> Count:
        return Count()

    def inc(self, amount: float = 1) -> None:
        self._the_one().value += amount

    def _empty(self) -> CounterMetricFamily:
        return CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def collect(self) -> Iterable[Metric]:
        family = self._empty()
        created = _export_created()
        for values, series in list(self._series.items()):
            family.add_metric(values, series.value, series.created if created else None)
        return [family]


class HistogramTally(_Family[Spread]):
    """A `Histogram` family with these bucket bounds (+Inf added), labelled or not."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        buckets: Sequence[float] = (),
        registry: CollectorRegistry | None = None,
    ) -> None:
        bounds = [float(bound) for bound in buckets]
        self.bounds = (*bounds, INF) if not bounds or bounds[-1] != INF else tuple(bounds)
        self._le = [_le_label(bound) for bound in self.bounds]
        super().__init__(name, documentation, labelnames, registry)

    def _new(self) -> Spread:
        return Spread(self.bounds)

    def observe(self, amount: float) -> None:
        self._the_one().observe(amount)

    def _empty(self) -> HistogramMetricFamily:
        return HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def collect(self) -> Iterable[Metric]:
        family = self._empty()
        created = _export_created()
        for values, series in list(self._series.items()):
            labels = dict(zip(self.labelnames, values, strict=True))
            total = 0.0
            for le, count in zip(self._le, list(series.counts), strict=True):
                total += count
                family.add_sample(f"{self.name}_bucket", {**labels, "le": le}, total)
            family.add_sample(f"{self.name}_count", labels, total)
            if self.bounds[0] >= 0:
                family.add_sample(f"{self.name}_sum", labels, series.sum)
            if created:
                family.add_sample(f"{self.name}_created", labels, series.created)
        return [family]
