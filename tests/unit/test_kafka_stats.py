"""librdkafka's statistics documents boiled down: round-trips per broker, transaction states,
queued and sent messages, clients gone stale forgotten without the sent count going down."""

from __future__ import annotations

import json
import time
from typing import Any

from adapter.kafka_stats import TXN_STATES, ClientStatistics, parse
from adapter.metrics import Metrics


def _document(
    name: str,
    kind: str = "producer",
    queued: int = 0,
    sent: int = 0,
    txn_state: str | None = "Ready",
    rtt_us: dict[int, tuple[int, int, int]] | None = None,
) -> str:
    """A statistics document as librdkafka writes it (the fields read, and some not)."""
    brokers: dict[str, Any] = {
        "localhost:9092/bootstrap": {"nodeid": -1, "rtt": {"avg": 9, "p99": 9, "cnt": 3}},
    }
    for node, (average, p99, count) in (rtt_us or {}).items():
        rtt = {"min": 1, "max": p99, "avg": average, "p99": p99, "cnt": count}
        brokers[f"localhost:9092/{node}"] = {"nodeid": node, "state": "UP", "rtt": rtt}
    document: dict[str, Any] = {
        "name": name,
        "client_id": "rdkafka",
        "type": kind,
        "ts": 1,
        "msg_cnt": queued,
        "txmsgs": sent,
        "brokers": brokers,
    }
    if txn_state is not None:
        document["eos"] = {"idemp_state": "Assigned", "txn_state": txn_state}
    return json.dumps(document)


def test_a_document_is_reduced_to_what_the_metrics_show() -> None:
    report = parse("writer", _document("p#1", queued=3, sent=40, rtt_us={1: (2000, 9000, 5)}))
    assert (report.role, report.kind, report.queued, report.sent) == ("writer", "producer", 3, 40)
    assert report.txn_state == "Ready"
    assert report.rtt == {"1": (0.002, 0.009)}  # microseconds made seconds; bootstrap left out


def test_a_broker_without_requests_in_the_window_has_no_round_trip() -> None:
    assert parse("follower", _document("c#1", rtt_us={1: (0, 0, 0)})).rtt == {}


def test_clients_are_summed_by_role_and_brokers_show_the_worst_client() -> None:
    stats = ClientStatistics(interval_ms=1000)
    stats.report("writer", _document("p#1", queued=2, sent=10, rtt_us={1: (1000, 5000, 1)}), 0)
    stats.report("writer", _document("p#2", queued=1, sent=5, txn_state="InTransaction"), 0)
    consumer = _document("c#1", kind="consumer", txn_state=None, rtt_us={1: (3000, 4000, 2)})
    stats.report("follower", consumer, 0)
    summary = stats.summary(now=1)
    assert summary.queued == {"writer": 3}
    assert summary.sent == {"writer": 15}
    assert summary.rtt == {("1", "avg"): 0.003, ("1", "p99"): 0.005}
    assert summary.transactions["Ready"] == 1
    assert summary.transactions["InTransaction"] == 1
    assert set(summary.transactions) == set(TXN_STATES)


def test_a_stale_client_is_forgotten_but_its_sent_messages_stay_counted() -> None:
    stats = ClientStatistics(interval_ms=1000)
    stats.report("writer", _document("p#1", sent=10), 0)
    stats.report("writer", _document("p#2", sent=5), 100)
    summary = stats.summary(now=100)
    assert summary.sent == {"writer": 15}
    assert summary.transactions["Ready"] == 1  # p#1 is gone
    # p#1 was idle, not closed: its next report replaces what was kept of it.
    stats.report("writer", _document("p#1", sent=12), 101)
    assert stats.summary(now=101).sent == {"writer": 17}


def test_a_malformed_document_is_dropped() -> None:
    stats = ClientStatistics(interval_ms=1000)
    stats.report("writer", "{not json", 0)
    stats.report("writer", "[]", 0)
    assert stats.summary(now=0).queued == {}


def test_the_metrics_show_the_summary() -> None:
    metrics, stats = Metrics(), ClientStatistics(interval_ms=1000)
    metrics.watch_kafka_clients(stats)
    document = _document("p#1", queued=4, sent=9, rtt_us={2: (1500, 8000, 4)})
    stats.report("writer", document, time.monotonic())  # the metrics read the monotonic clock
    value = metrics.registry.get_sample_value
    assert value("durable_kafka_kafka_broker_rtt_seconds", {"broker": "2", "stat": "p99"}) == 0.008
    assert value("durable_kafka_kafka_queued_messages", {"client": "writer"}) == 4
    assert value("durable_kafka_kafka_sent_messages_total", {"client": "writer"}) == 9
    assert value("durable_kafka_kafka_transaction_producers", {"state": "Ready"}) == 1
    assert value("durable_kafka_kafka_transaction_producers", {"state": "FatalError"}) == 0
