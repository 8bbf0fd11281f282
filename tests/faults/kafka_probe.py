"""How long Kafka itself was unavailable during a fault: a plain transactional client, beside
the adapters, commits one record at a time to the busiest stream's partition through the same
transaction coordinator as that stream's write slot. The adapters' own share of an outage is
what the load saw (`longest_unavailable`) less what this client saw.

Its records carry `PROBE_HEADER` and a key no stream has; the checker's log reader leaves them
out, and the adapters skip them as they skip other streams' records of a partition.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, KafkaException, Producer

from devstack import cluster, kafka

PROBE_HEADER = "fault-probe"
PROBE_KEY = b"\x00fault-probe"
TIMEOUT_S = 3.0  # as the adapters' kafka_timeout_ms in the fault suite
PAUSE_S = 0.1  # between two commits


@dataclass
class Commit:
    invoked: float
    completed: float
    ok: bool


@dataclass
class KafkaProbe:
    bootstrap: str
    topic: str
    partition: int
    transactional_id: str
    commits: list[Commit] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="kafka-probe", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=4 * TIMEOUT_S + 30)

    def longest_unavailable(self) -> float:
        """The longest time between two successful commits while commits were being tried
        (the same measure as the load's `longest_unavailable`)."""
        if not self.commits:
            return 0.0
        done = sorted(c.completed for c in self.commits if c.ok)
        start = min(c.invoked for c in self.commits)
        end = max(c.completed for c in self.commits)
        return max(b - a for a, b in itertools.pairwise([start, *done, end]))

    def _run(self) -> None:
        producer: Producer | None = None
        while not self._stop.is_set():
            invoked = time.monotonic()
            try:
                producer = producer or self._producer()
                self._commit(producer)
                ok = True
            except KafkaException as error:
                ok = False
                producer = self._after(producer, error)
            self.commits.append(Commit(invoked, time.monotonic(), ok))
            self._stop.wait(PAUSE_S)

    def _producer(self) -> Producer:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": self.transactional_id,
                "transaction.timeout.ms": 10_000,
                "log_level": 0,
            }
        )
        producer.init_transactions(TIMEOUT_S)
        return producer

    def _commit(self, producer: Producer) -> None:
        producer.begin_transaction()
        producer.produce(self.topic, b"", PROBE_KEY, self.partition, headers=[(PROBE_HEADER, b"1")])
        producer.commit_transaction(TIMEOUT_S)

    def _after(self, producer: Producer | None, error: KafkaException) -> Producer | None:
        """The producer to go on with: the same after an abortable error, once aborted; a new
        one after anything else (its `init_transactions` ends what the old one left open)."""
        reason: KafkaError = error.args[0]
        if producer is not None and reason.txn_requires_abort():
            try:
                producer.abort_transaction(TIMEOUT_S)
                return producer
            except KafkaException:
                pass
        return None


def probe(bootstrap: str, topic: str, partition: int, slot_transactional_id: str) -> KafkaProbe:
    """A probe of `topic`'s `partition` whose transactions the slot's own coordinator keeps."""
    return KafkaProbe(bootstrap, topic, partition, _same_coordinator(slot_transactional_id))


def _same_coordinator(transactional_id: str) -> str:
    """A transactional id of the probe's own that hashes to `transactional_id`'s
    __transaction_state partition, so a fault of that coordinator is a fault of both."""
    wanted = cluster.transaction_state_partition(transactional_id)
    for n in range(100 * kafka.TRANSACTION_STATE_PARTITIONS):
        candidate = f"fault-probe-{n}"
        if cluster.transaction_state_partition(candidate) == wanted:
            return candidate
    raise AssertionError(f"no probe id shares {transactional_id}'s coordinator")
