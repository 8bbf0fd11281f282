"""librdkafka's statistics (`statistics.interval.ms`), boiled down to a few figures per client.

Each Kafka client of this instance emits a JSON document every interval (its `stats_cb`, run
on whatever thread polls it). Only what a dashboard needs is kept: each broker's request
round-trip (average and p99), the transactional producers' states, and the messages queued
and sent. Labels stay few and fixed: a client's role (writer, follower, ...), a broker's node
id and a transaction state, never a topic, partition or client instance.

Pure apart from the clock passed in: `tests/unit/test_kafka_stats.py` feeds it documents.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# librdkafka's transaction states (rdkafka_idempotence.h), every one shown from the start.
TXN_STATES = (
    "Init",
    "WaitPID",
    "ReadyNotAcked",
    "Ready",
    "InTransaction",
    "BeginCommit",
    "CommittingTransaction",
    "CommitNotAcked",
    "BeginAbort",
    "AbortingTransaction",
    "AbortedNotAcked",
    "AbortableError",
    "FatalError",
)
# A client that has not reported for this many intervals (and at least a minute) is gone:
# closed, or idle (a writer's producer serves its callbacks only when it flushes).
STALE_INTERVALS = 4
STALE_FLOOR_S = 60.0
# Clients gone stale that are remembered by name, so that one that reports again (an idle
# writer's producer flushing) does not count its sent messages twice.
RETIRED_NAMES = 1024


@dataclass(frozen=True)
class ClientReport:
    """One client's last statistics document, reduced."""

    name: str  # librdkafka's name of the client instance (`rdkafka#producer-3`)
    role: str
    kind: str  # "producer" or "consumer"
    queued: int  # msg_cnt: messages in the producer's queues now
    sent: int  # txmsgs: messages sent to brokers since the client started
    txn_state: str | None  # None: not an idempotent or transactional producer
    # Node id -> (average, p99) round-trip in seconds, for brokers that answered in the window.
    rtt: Mapping[str, tuple[float, float]] = field(default_factory=dict)


def parse(role: str, document: str) -> ClientReport:
    """A statistics document reduced to a report; a malformed one raises ValueError."""
    raw = json.loads(document)
    if not isinstance(raw, dict):
        raise ValueError("a statistics document is a JSON object")
    eos = raw.get("eos")
    txn_state = eos.get("txn_state") if isinstance(eos, dict) else None
    return ClientReport(
        name=str(raw.get("name", "")),
        role=role,
        kind=str(raw.get("type", "")),
        queued=int(raw.get("msg_cnt", 0)),
        sent=int(raw.get("txmsgs", 0)),
        txn_state=txn_state if isinstance(txn_state, str) else None,
        rtt=_round_trips(raw.get("brokers")),
    )


def _round_trips(brokers: Any) -> dict[str, tuple[float, float]]:
    """Per broker node id: bootstrap entries (node id -1) and brokers with no request in the
    window (`cnt` 0: librdkafka then reports zeros, not a round-trip) are left out."""
    found: dict[str, tuple[float, float]] = {}
    for broker in (brokers or {}).values():
        rtt = broker.get("rtt") or {}
        node = int(broker.get("nodeid", -1))
        if node < 0 or not rtt.get("cnt"):
            continue
        average, p99 = rtt.get("avg", 0) / 1e6, rtt.get("p99", 0) / 1e6  # microseconds
        if str(node) in found:  # several connections to one broker: the worst
            average, p99 = max(average, found[str(node)][0]), max(p99, found[str(node)][1])
        found[str(node)] = (average, p99)
    return found


@dataclass(frozen=True)
class Summary:
    """What the metrics show, over every live client of the process."""

    rtt: dict[tuple[str, str], float]  # (node id, "avg" or "p99") -> seconds: the worst client
    queued: dict[str, int]  # role -> messages queued now
    sent: dict[str, int]  # role -> messages sent, including by clients since closed
    transactions: dict[str, int]  # transaction state -> producers in it


class ClientStatistics:
    """The latest report of each client, fed from librdkafka's threads, read at each scrape."""

    def __init__(self, interval_ms: int) -> None:
        self.interval_ms = interval_ms
        self.stale_s = max(STALE_FLOOR_S, STALE_INTERVALS * interval_ms / 1000)
        self._lock = threading.Lock()
        self._latest: dict[str, tuple[float, ClientReport]] = {}  # client name -> (at, report)
        self._retired_sent: dict[str, int] = {}  # role -> messages sent by clients gone
        self._retired: dict[str, tuple[str, int]] = {}  # client name -> (role, sent), newest last

    def report(self, role: str, document: str, now: float) -> None:
        """A client's `stats_cb`. A document that does not parse is dropped: statistics must
        never break the client that reports them."""
        try:
            report = parse(role, document)
        except (ValueError, TypeError, AttributeError):
            return
        name = report.name
        with self._lock:
            if (back := self._retired.pop(name, None)) is not None:
                role_, sent = back
                self._retired_sent[role_] -= sent
            self._latest[name] = (now, report)

    def summary(self, now: float) -> Summary:
        with self._lock:
            self._forget_stale(now)
            reports = [report for _at, report in self._latest.values()]
            retired = dict(self._retired_sent)
        return _summarize(reports, retired)

    def _forget_stale(self, now: float) -> None:
        for name, (at, report) in list(self._latest.items()):
            if now - at > self.stale_s:
                del self._latest[name]
                # Its count stays in the total, so that the counter never goes down.
                role = report.role
                self._retired_sent[role] = self._retired_sent.get(role, 0) + report.sent
                self._retired[name] = (role, report.sent)
                if len(self._retired) > RETIRED_NAMES:
                    del self._retired[next(iter(self._retired))]


def _summarize(reports: list[ClientReport], retired: dict[str, int]) -> Summary:
    rtt: dict[tuple[str, str], float] = {}
    queued: dict[str, int] = {}
    sent = dict(retired)
    transactions = dict.fromkeys(TXN_STATES, 0)
    for report in reports:
        for node, (average, p99) in report.rtt.items():
            rtt[(node, "avg")] = max(rtt.get((node, "avg"), 0.0), average)
            rtt[(node, "p99")] = max(rtt.get((node, "p99"), 0.0), p99)
        if report.kind == "producer":
            queued[report.role] = queued.get(report.role, 0) + report.queued
            sent[report.role] = sent.get(report.role, 0) + report.sent
        if report.txn_state is not None and report.txn_state in transactions:
            transactions[report.txn_state] += 1
    return Summary(rtt, queued, sent, transactions)
