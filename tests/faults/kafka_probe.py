"""How long Kafka itself was unavailable during a fault, as two plain clients beside the
adapters saw it:
- a transactional producer committing one record at a time to the busiest stream's partition
  through the same transaction coordinator as that stream's write slot (`KafkaProbe`);
- a consumer in a group of its own that the owners' group's coordinator keeps, with the
  owners' session timeout, committing an offset again and again: a commit gets through only
  while the coordinator answers and still counts the member in (`GroupProbe`). A coordinator
  that stops answering past the session ends every member's session, the adapters' and this
  one's alike, and each must join again.
An adapter needs both to take a write, so Kafka's own share of an outage is the longest time
either was out, the two joined where they meet (`longest_joint`); the adapters' share is what
the load saw (`longest_unavailable`) less that.

The producer's records carry `PROBE_HEADER` and a key no stream has; the checker's log reader
leaves them out, and the adapters skip them as they skip other streams' records of a partition.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from adapter.cluster.ownership import heartbeat_ms
from devstack import cluster, kafka

PROBE_HEADER = "fault-probe"
PROBE_KEY = b"\x00fault-probe"
TIMEOUT_S = 3.0  # as the adapters' kafka_timeout_ms in the fault suite
PAUSE_S = 0.1  # between two commits
# Two probes' outages shorter than this are their commits' ordinary spacing, not an outage;
# longer ones that overlap or touch are one outage of Kafka.
OUTAGE_FLOOR_S = 1.0


@dataclass
class Commit:
    invoked: float
    completed: float
    ok: bool


def longest_gap(commits: list[Commit]) -> float:
    """The longest time between two successful commits while commits were being tried (the
    same measure as the load's `longest_unavailable`)."""
    return max((b - a for a, b in _gaps(commits)), default=0.0)


def longest_joint(*probes: list[Commit], floor_s: float = OUTAGE_FLOOR_S) -> float:
    """The longest outage of any probe, or of several whose outages (gaps of at least
    `floor_s`) overlap: a client needing all of them was out that long. Two gaps of one probe
    only meet at a commit that got through, so they stay apart."""
    outages = sorted(g for commits in probes for g in _gaps(commits) if g[1] - g[0] >= floor_s)
    joined: list[tuple[float, float]] = []
    for start, end in outages:
        if joined and start < joined[-1][1]:
            joined[-1] = (joined[-1][0], max(end, joined[-1][1]))
        else:
            joined.append((start, end))
    longest = max((end - start for start, end in joined), default=0.0)
    return max(longest, *(longest_gap(commits) for commits in probes))


def _gaps(commits: list[Commit]) -> list[tuple[float, float]]:
    """From the first attempt to the last: the spans between successful commits."""
    if not commits:
        return []
    done = sorted(c.completed for c in commits if c.ok)
    start = min(c.invoked for c in commits)
    end = max(c.completed for c in commits)
    return list(itertools.pairwise([start, *done, end]))


@dataclass
class _Probe:
    commits: list[Commit] = field(default_factory=list, kw_only=True)
    _stop: threading.Event = field(default_factory=threading.Event, kw_only=True)
    _thread: threading.Thread | None = field(default=None, kw_only=True)

    def start(self) -> None:
        name = type(self).__name__
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=4 * TIMEOUT_S + 30)

    def longest_unavailable(self) -> float:
        return longest_gap(self.commits)

    def _run(self) -> None:
        raise NotImplementedError


@dataclass
class KafkaProbe(_Probe):
    bootstrap: str
    topic: str
    partition: int
    transactional_id: str

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


@dataclass
class GroupProbe(_Probe):
    bootstrap: str
    topic: str  # subscribed to, never read: the group needs a topic to divide
    group: str
    session_timeout_ms: int
    _sent: float | None = field(default=None, kw_only=True)  # the commit awaiting its answer

    def _run(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "session.timeout.ms": self.session_timeout_ms,
                "heartbeat.interval.ms": heartbeat_ms(self.session_timeout_ms),
                "enable.auto.commit": False,
                "on_commit": self._answered,
                "log_level": 0,
            }
        )
        consumer.subscribe([self.topic])
        try:
            while not self._stop.is_set():
                consumer.poll(PAUSE_S)  # heartbeats, rebalances and commit answers
                now = time.monotonic()
                if self._sent is not None and now - self._sent > TIMEOUT_S:
                    self.commits.append(Commit(self._sent, now, False))  # no answer in time
                    self._sent = None
                assigned = consumer.assignment()
                if self._sent is None and assigned:
                    self._sent = now
                    held = TopicPartition(self.topic, assigned[0].partition, 0)
                    consumer.commit(offsets=[held], asynchronous=True)
        finally:
            consumer.close()

    def _answered(self, error: KafkaError | None, _offsets: list[TopicPartition]) -> None:
        if self._sent is not None:  # an answer past its time was counted as failed already
            self.commits.append(Commit(self._sent, time.monotonic(), error is None))
            self._sent = None


def probe(bootstrap: str, topic: str, partition: int, slot_transactional_id: str) -> KafkaProbe:
    """A probe of `topic`'s `partition` whose transactions the slot's own coordinator keeps."""
    return KafkaProbe(bootstrap, topic, partition, _same_coordinator(slot_transactional_id))


def group_probe(bootstrap: str, topic: str, owners_group: str, session_ms: int) -> GroupProbe:
    """A probe of the coordinator keeping `owners_group`, in a group of its own on `topic`."""
    return GroupProbe(bootstrap, topic, _same_coordinator(owners_group), session_ms)


def _same_coordinator(key: str) -> str:
    """A transactional id or group id of the probe's own that hashes to `key`'s partition of
    __transaction_state (a transactional id) or __consumer_offsets (a group id: the two
    topics have as many partitions), so a fault of that coordinator is a fault of both."""
    wanted = cluster.transaction_state_partition(key)
    for n in range(100 * kafka.TRANSACTION_STATE_PARTITIONS):
        candidate = f"fault-probe-{n}"
        if cluster.transaction_state_partition(candidate) == wanted:
            return candidate
    raise AssertionError(f"no probe id shares {key}'s coordinator")
