"""The Prometheus metrics one instance exports, in a registry of its own.

Labels name only things of which there are few and a fixed number (a route template, a
method, a status, an error code, a read mode, a Kafka stage): never a bucket, stream, producer
or principal, so a million streams add no series. Each instance (and each app a test builds)
has its own registry, served on the ops listener's `/metrics` (`adapter/http/ops_listener.py`).

The registry holds prometheus-client's process, platform and garbage-collector collectors too
(`process_*`, `python_*`). They read `/proc/self` at each scrape, and each worker of `serve
--workers N` builds its own registry behind its own ops listener, so every worker's series are
its own process's; the parent serves no metrics (docs/operations.md, "Workers").
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable, Iterator
from importlib.metadata import version

from prometheus_client import (
    GC_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    Info,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from adapter.kafka_stats import ClientStatistics
from adapter.loop_metrics import Count, CounterTally, HistogramTally, Spread

# Seconds, from a hot-tail read (~1 ms) to a write waiting out its deadline (~30 s).
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
READ_MODES = ("catch-up", "long-poll", "sse", "snapshot", "bootstrap")
KAFKA_STAGES = ("produce", "commit")
# Why a request was refused by authentication or authorization (`adapter/http/auth.py`).
AUTH_FAILURES = ("missing", "malformed", "expired", "invalid", "insufficient_scope")
# What made a peer suspect an owner gone or paused, and how its check ended
# (`adapter/cluster/dead_owners.py`: its `Signal` and `Outcome`).
EVICTION_SIGNALS = ("refused", "unanswered")
EVICTION_OUTCOMES = ("evicted", "alive", "failed", "already")


class Metrics:
    """Every instrument, registered in `registry`."""

    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry(auto_describe=True)
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        if GC_COLLECTOR is not None:  # None where the interpreter has no gc.get_stats
            GCCollector(registry=registry)
        self._answered: dict[tuple[str, str, int], tuple[Count, Spread]] = {}
        # The request path's instruments count without a lock (`adapter/loop_metrics.py`).
        self.requests = CounterTally(
            "durable_kafka_http_requests",
            "HTTP requests answered, by method, route template and status.",
            ["method", "route", "status"],
            registry=registry,
        )
        self.request_seconds = HistogramTally(
            "durable_kafka_http_request_duration_seconds",
            "Time from a request's headers to its answer's end, by method, route template "
            "and status class (2xx, 4xx, ...).",
            ["method", "route", "status_class"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.append_seconds = HistogramTally(
            "durable_kafka_append_duration_seconds",
            "Time from an append's body received to its Kafka transaction committed.",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.appended_bytes = CounterTally(
            "durable_kafka_appended_bytes",
            "Body bytes of appends that were written.",
            registry=registry,
        )
        self.read_bytes = Counter(
            "durable_kafka_read_bytes",
            "Response body bytes of stream reads, by mode.",
            ["mode"],
            registry=registry,
        )
        self.sse_connections = Gauge(
            "durable_kafka_sse_connections",
            "SSE responses open now.",
            registry=registry,
        )
        self.live_waiters = Gauge(
            "durable_kafka_live_waiters",
            "Requests waiting for a stream to change now (long-polls, forwarded writes).",
            registry=registry,
        )
        self.kafka_seconds = Histogram(
            "durable_kafka_kafka_duration_seconds",
            "Kafka time of a write transaction, by stage: produce (records sent and "
            "acknowledged) and commit (the transaction committed).",
            ["stage"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        # Every stage from the start, at 0.
        self._stages = {stage: self.kafka_seconds.labels(stage) for stage in KAFKA_STAGES}
        self.rejections = Counter(
            "durable_kafka_rejections",
            "Requests answered with an error, by error code.",
            ["code"],
            registry=registry,
        )
        self.auth_failures = Counter(
            "durable_kafka_auth_failures",
            "Requests refused by authentication (401) or authorization (403), by reason: "
            "no token, a malformed Authorization, an expired token, another invalid token "
            "(unknown, badly signed, wrong issuer or audience), a token without the scope.",
            ["reason"],
            registry=registry,
        )
        self.format_level = Gauge(
            "durable_kafka_format_level",
            "The record format level this instance writes its state records in: the previous "
            "release's during a rolling upgrade, the newest once `durable-kafka upgrade "
            "finalize` is in force here (docs/how-to/upgrades.md).",
            registry=registry,
        )
        self.tier_lag_bytes = Gauge(
            "durable_kafka_tier_lag_bytes",
            "Bytes of the partitions this instance tiers that are past the hot window and not "
            "tiered yet, as its last pass over each saw them (0: tiering keeps up).",
            registry=registry,
        )
        self.tier_hot_bytes = Gauge(
            "durable_kafka_tier_hot_bytes",
            "Bytes of the partitions this instance tiers still held only in Kafka, as its last "
            "pass over each saw them.",
            registry=registry,
        )
        self.advertised_reachable = Gauge(
            "durable_kafka_advertised_reachable",
            "1 while this instance answers at its advertised URL (where peers forward writes), "
            "0 once it has not for several checks in a row (it then leaves the owners' group).",
            registry=registry,
        )
        self.age_retention_failures = Counter(
            "durable_kafka_age_retention_failures",
            "Streams an age retention pass of this instance could not trim (the broker away, "
            "a slot moving): each is tried again by the next pass, the others trimmed anyway.",
            registry=registry,
        )
        self.owner_evictions = Counter(
            "durable_kafka_owner_evictions",
            "Owners' group members this instance removed, by signal: `refused` (a forward to "
            "the owner failed and its address refused every connection) or `unanswered` (a "
            "forward and its liveness probes got no answer for `owner_unanswered_ms`).",
            ["signal"],
            registry=registry,
        )
        self.owner_eviction_checks = Counter(
            "durable_kafka_owner_eviction_checks",
            "Checks of an owner suspected gone or paused, by signal and outcome: `evicted`, "
            "`alive` (it answered: no eviction), `failed` (taken for gone, but its removal "
            "failed: its session decides) or `already` (taken for gone, and no member was left "
            "at its address to remove: another peer removed it first, or its session ended).",
            ["signal", "outcome"],
            registry=registry,
        )
        self.write_slots_owned = Gauge(
            "durable_kafka_write_slots_owned",
            "Write slots this instance (this worker) owns now: assigned by the owners' group.",
            registry=registry,
        )
        self.write_slots_ready = Gauge(
            "durable_kafka_write_slots_ready",
            "Write slots this instance owns whose writer is ready to accept appends now.",
            registry=registry,
        )
        self.write_slots = Gauge(
            "durable_kafka_write_slots",
            "Write slots of the deployment (`write_slots`): every instance's owned slots add up "
            "to this when each slot has an owner.",
            registry=registry,
        )
        self.build = Info("durable_kafka_build", "What this process runs.", registry=registry)
        self.build.info(_build_info())
        for mode in READ_MODES:
            self.read_bytes.labels(mode)  # every mode from the start, at 0
        for reason in AUTH_FAILURES:
            self.auth_failures.labels(reason)
        for signal in EVICTION_SIGNALS:
            self.owner_evictions.labels(signal)
            for outcome in EVICTION_OUTCOMES:
                self.owner_eviction_checks.labels(signal, outcome)

    def answered(self, method: str, route: str, status: int, seconds: float) -> None:
        """A request answered: counted, and its duration observed. The labelled series are
        kept (one lookup per request, not two); their labels are few and fixed, so the cache
        is too."""
        series = self._answered.get((method, route, status))
        if series is None:
            series = self._answered[(method, route, status)] = (
                self.requests.labels(method, route, str(status)),
                self.request_seconds.labels(method, route, f"{status // 100}xx"),
            )
        count, duration = series
        count.inc()
        duration.observe(seconds)

    def owner_eviction(self, signal: str, outcome: str, members: int) -> None:
        """A check of a suspected owner ended, having removed `members` from the group."""
        self.owner_eviction_checks.labels(signal, outcome).inc()
        if members:
            self.owner_evictions.labels(signal).inc(members)

    def watch_live_waiters(self, count: Callable[[], int]) -> None:
        self.live_waiters.set_function(count)

    def watch_advertised_reach(self, reachable: Callable[[], bool]) -> None:
        self.advertised_reachable.set_function(lambda: 1.0 if reachable() else 0.0)

    def watch_consumer_lag(self, lags: Callable[[], dict[str, int]]) -> None:
        """`lags()` at each scrape: records of each state topic not yet followed."""
        self.registry.register(_ConsumerLag(lags))

    def watch_checks(self, states: Callable[[], dict[str, bool]]) -> None:
        """`states()` at each scrape: whether each readiness check holds."""
        self.registry.register(_Checks(states))

    def watch_format_level(self, level: Callable[[], int]) -> None:
        """The record format level written now, read at each scrape."""
        self.format_level.set_function(level)

    def watch_write_slots(
        self, total: int, owned: Callable[[], int], ready: Callable[[], int]
    ) -> None:
        """The slot writers' figures, read at each scrape."""
        self.write_slots.set(total)
        self.write_slots_owned.set_function(owned)
        self.write_slots_ready.set_function(ready)

    def watch_kafka_clients(self, statistics: ClientStatistics) -> None:
        """librdkafka's statistics of every client, summed up at each scrape."""
        self.registry.register(_KafkaClients(statistics))

    def watch_tier(self, lag_bytes: Callable[[], int], hot_bytes: Callable[[], int]) -> None:
        """The tier worker's figures, read at each scrape."""
        self.tier_lag_bytes.set_function(lag_bytes)
        self.tier_hot_bytes.set_function(hot_bytes)

    def kafka_timing(self, stage: str, seconds: float) -> None:
        """Called on the writer's thread (prometheus_client's instruments are thread-safe;
        the stages' series are made once, in `__init__`: `labels()` costs a lock and a lookup)."""
        series = self._stages.get(stage)
        (series or self.kafka_seconds.labels(stage)).observe(seconds)


def _build_info() -> dict[str, str]:
    return {
        "version": version("durable-kafka"),
        "python": platform.python_version(),
        "aiohttp": version("aiohttp"),
        "confluent_kafka": version("confluent-kafka"),
    }


class _ConsumerLag(Collector):
    def __init__(self, lags: Callable[[], dict[str, int]]) -> None:
        self.lags = lags

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "durable_kafka_consumer_lag_records",
            "Records of each state topic (by kind: meta, producers, owners, snapshots, tier) "
            "this instance has not followed yet, from the last fetch's high watermark.",
            labels=["topic"],
        )
        for kind, lag in sorted(self.lags().items()):
            family.add_metric([kind], lag)
        yield family


class _Checks(Collector):
    def __init__(self, states: Callable[[], dict[str, bool]]) -> None:
        self.states = states

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "durable_kafka_check_ok",
            "1 while a check of /readyz holds (kafka, object_store, ownership, ...), 0 while "
            "it fails: a dependency down shows here without making the instance unready.",
            labels=["check"],
        )
        for name, ok in self.states().items():
            family.add_metric([name], 1 if ok else 0)
        yield family


class _KafkaClients(Collector):
    """librdkafka's statistics as gauges (`adapter/kafka_stats.py`)."""

    def __init__(self, statistics: ClientStatistics) -> None:
        self.statistics = statistics

    def collect(self) -> Iterator[Metric]:
        summary = self.statistics.summary(time.monotonic())
        rtt = GaugeMetricFamily(
            "durable_kafka_kafka_broker_rtt_seconds",
            "Round-trip time of Kafka requests to each broker (by node id), as librdkafka "
            "measured it over its last statistics interval: the average and the p99, the worst "
            "of this instance's clients. No series for a broker no request went to.",
            labels=["broker", "stat"],
        )
        for (node, stat), seconds in sorted(summary.rtt.items()):
            rtt.add_metric([node, stat], seconds)
        yield rtt
        queued = GaugeMetricFamily(
            "durable_kafka_kafka_queued_messages",
            "Messages in the Kafka producers' queues now, not yet acknowledged by a broker, by "
            "client role (writer: the slot writers; mount-writer: appends to mounted topics).",
            labels=["client"],
        )
        sent = CounterMetricFamily(
            "durable_kafka_kafka_sent_messages",
            "Messages the Kafka producers sent to brokers (librdkafka's txmsgs), by client role.",
            labels=["client"],
        )
        for role in sorted(set(summary.queued) | set(summary.sent)):
            queued.add_metric([role], summary.queued.get(role, 0))
            sent.add_metric([role], summary.sent.get(role, 0))
        yield queued
        yield sent
        transactions = GaugeMetricFamily(
            "durable_kafka_kafka_transaction_producers",
            "Transactional producers by librdkafka's transaction state (Ready, InTransaction, "
            "CommittingTransaction, ..., AbortableError, FatalError), among those that reported "
            "in the last few statistics intervals.",
            labels=["state"],
        )
        for state, count in summary.transactions.items():
            transactions.add_metric([state], count)
        yield transactions
