"""How this instance reaches Kafka: every confluent_kafka client config is built here.

The operator's client properties (librdkafka keys: `security.protocol`, `sasl.*`, `ssl.*`, ...)
go into every client, under the keys the server sets itself (`OWNED`, refused at start by
`topology/client_properties.py`). Every consumer group id and transactional id starts with the
topic prefix, so an administrator grants prefixed ACLs (docs/operations.md, "Secure Kafka").
Failures are named here too: an authentication or TLS fault a client's error callback reported
(`ClientProblems`), an ACL's refusal (`denied`).
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from topology.client_properties import OWNED
from topology.live_clients import LiveAdmin, LiveClients, LiveConsumer, LiveProducer

# How long an authentication or TLS failure a client reported explains a failing call.
PROBLEM_TTL_S = 60.0


@dataclass(frozen=True)
class Problem:
    """An authentication or TLS failure a client reported (`reason` says which)."""

    reason: str
    detail: str
    at: float


class ClientProblems:
    """The latest authentication or TLS failure any client reported through its `error_cb`.

    librdkafka's calls fail with a bare transport error or a timeout when the broker refused
    the credentials or the handshake; only the error callback says why.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: Problem | None = None

    def report(self, error: KafkaError) -> None:
        """The clients' `error_cb` (on a librdkafka thread or a poll)."""
        reason = problem_reason(error)
        if reason is not None:
            with self._lock:
                self._latest = Problem(reason, error.str(), time.monotonic())

    def latest(self, ttl_s: float = PROBLEM_TTL_S) -> Problem | None:
        with self._lock:
            problem = self._latest
        if problem is None or time.monotonic() - problem.at > ttl_s:
            return None
        return problem

    def clear(self) -> None:
        with self._lock:
            self._latest = None

    def explain(self, failure: str) -> str:
        """`failure`, or why it failed when a client reported an authentication or TLS fault."""
        problem = self.latest()
        return failure if problem is None else f"{problem.reason}: {problem.detail}"


def serve_callbacks(client: Producer | Consumer | AdminClient) -> None:
    """Run the error callbacks librdkafka queued (it runs them only on a poll), without waiting:
    after a failed call, so `ClientProblems` knows why it failed."""
    with contextlib.suppress(KafkaException):  # a fatal error, already raised by the call
        client.poll(0)


def problem_reason(error: KafkaError) -> str | None:
    """'authentication failed', 'TLS handshake failed' or None for any other error."""
    if error.code() == KafkaError._AUTHENTICATION:
        return "authentication failed"
    if error.code() == KafkaError._SSL or _TLS_FAILURE.search(error.str()):
        return "TLS handshake failed"
    return None


class SecurityFailures(logging.Filter):
    """Drops librdkafka's lines about a refused credential or TLS handshake.

    Each reconnection logs one (for TLS about every 100 ms, on each client); the error
    callback records the failure instead, and readiness reports it once per check.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return not _SECURITY_FAILURE.search(record.getMessage())


_TLS_FAILURE = re.compile(r"SSL handshake failed|SSL routines|certificate verify failed")
_SECURITY_FAILURE = re.compile(f"SASL authentication error|{_TLS_FAILURE.pattern}")
_FILTER = SecurityFailures()


def _quiet_logger(name: str) -> logging.Logger:
    logger = logging.getLogger(name)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    return logger


@dataclass(frozen=True)
class KafkaAccess:
    """Where the cluster is, the operator's client properties and the prefix of our ids."""

    bootstrap_servers: str
    prefix: str
    properties: Mapping[str, str] = field(default_factory=dict, repr=False)
    problems: ClientProblems = field(default_factory=ClientProblems, compare=False, repr=False)
    clients: LiveClients = field(default_factory=LiveClients, compare=False, repr=False)
    # librdkafka's statistics: every client emits a JSON document this often (0: never), handed
    # to `on_statistics(role, document)` on the thread that polls the client.
    statistics_interval_ms: int = 0
    on_statistics: Callable[[str, str], None] | None = field(
        default=None, compare=False, repr=False
    )

    def config(self, owned: Mapping[str, Any], logger: str) -> dict[str, Any]:
        """A client's config: the operator's properties, then the server's own (`owned`).
        `logger` names the client's role too (`librdkafka.writer`: its statistics' `writer`)."""
        if stray := sorted(set(owned) - OWNED):
            raise ValueError(f"add {stray} to OWNED: the server sets them")
        return {
            **self.properties,
            **owned,
            **self._statistics(logger.rpartition(".")[2]),
            "bootstrap.servers": self.bootstrap_servers,
            "logger": _quiet_logger(logger),  # not stderr
            "error_cb": self.problems.report,
        }

    def producer(self, config: Mapping[str, Any]) -> LiveProducer:
        """A producer with `config` (from `config()`) and the latest SASL credentials."""
        return self.clients.create(LiveProducer, config)

    def consumer(self, config: Mapping[str, Any]) -> LiveConsumer:
        return self.clients.create(LiveConsumer, config)

    def admin_client(self, config: Mapping[str, Any]) -> LiveAdmin:
        return self.clients.create(LiveAdmin, config)

    def _statistics(self, role: str) -> dict[str, Any]:
        sink = self.on_statistics
        if sink is None or self.statistics_interval_ms <= 0:
            return {}
        return {
            "statistics.interval.ms": self.statistics_interval_ms,
            "stats_cb": lambda document: sink(role, document),
        }

    def group(self, role: str, unique: bool = False) -> str:
        """A consumer group id under the prefix (librdkafka requires one even for a consumer
        that never joins, and its FindCoordinator is checked against the Group ACLs)."""
        return f"{self.prefix}{role}-{uuid.uuid4().hex}" if unique else f"{self.prefix}{role}"

    def transactional_id(self, role: str) -> str:
        return f"{self.prefix}{role}"


# The Kafka errors that say an ACL refused an operation, by the type of resource refused.
_DENIED_KINDS = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "Topic",
    KafkaError.GROUP_AUTHORIZATION_FAILED: "Group",
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "TransactionalId",
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: "Cluster",
}


def refusal_of(error: BaseException, asked: Mapping[str, tuple[str, str]]) -> str | None:
    """`denied` for the KafkaError a KafkaException carries; None for any other exception."""
    inner = error.args[0] if isinstance(error, KafkaException) and error.args else None
    return denied(inner, asked) if isinstance(inner, KafkaError) else None


def denied(error: KafkaError, asked: Mapping[str, tuple[str, str]]) -> str | None:
    """`DENIED: <operation> on <type> <name>` when an ACL refused the call, else None.

    `asked` maps each resource type the call touches to (operation, name): Kafka's error names
    only the type; the caller knows what it asked for.
    """
    kind = _DENIED_KINDS.get(error.code())
    if kind is None:
        return None
    unnamed = "kafka-cluster" if kind == "Cluster" else "(not named by Kafka)"
    operation, name = asked.get(kind, ("an operation", unnamed))
    return f"DENIED: {operation} on {kind} {name}"
