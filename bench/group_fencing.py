"""What fencing writers by the owners' group generation would cost, on a real broker.

Today each write slot has a transactional producer of its own, and the next owner of a slot
fences the last one by initialising the slot's transactional id. One producer per instance,
writing every slot it owns in one transaction, would have to be fenced another way: each
transaction also commits offsets of the slots it writes to the owners' group
(`send_offsets_to_transaction` with the group metadata of the member that owns them), which the
group coordinator accepts only from a member of the current generation. This measures, on one
broker, what that adds to a transaction, and checks the two facts such a design rests on:

- `latency`: one-record transactions without and with the offsets (sent after the flush), and
  the ratio of their medians;
- `stable`: a member fetching the group's committed offsets (read_committed) waits while a
  transaction holding offsets for them is open, so a new owner can wait out its predecessor;
- `fenced`: offsets sent with the metadata of a generation that has ended are refused
  (ILLEGAL_GENERATION, an abortable error), so a stale owner's transaction cannot commit.

    .venv/bin/python -m bench.group_fencing --bootstrap-servers 127.0.0.1:9092

The consumer's group metadata is taken on its own thread (in the assignment callback):
`consumer_group_metadata()` called from another thread while the consumer polls blocks.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from bench import rawkafka

SLOTS = 4
TIMEOUT_S = 10.0


class Member:
    """A member of the owners' group polled on a thread of its own, like the instances'."""

    def __init__(self, bootstrap: str, group: str, topic: str, instance_id: str) -> None:
        self.held: set[int] = set()
        self.metadata: Any = None
        self._stop = threading.Event()
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.instance.id": instance_id,
                "partition.assignment.strategy": "cooperative-sticky",
                "session.timeout.ms": 6000,
                "enable.auto.commit": False,
            }
        )
        self._consumer.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked)
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.held.update(partition.partition for partition in partitions)
        self.metadata = consumer.consumer_group_metadata()

    def _revoked(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.held.difference_update(partition.partition for partition in partitions)

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._consumer.poll(0.1)

    def wait_for(self, count: int, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while len(self.held) < count and time.monotonic() < deadline:
            time.sleep(0.1)
        return len(self.held) >= count

    def stop_polling(self) -> None:
        self._stop.set()
        self._thread.join()


def transaction(producer: Producer, data: str, slots: str, member: Member | None) -> float:
    """One transaction of one record, with the member's slots' offsets if given; its seconds."""
    began = time.perf_counter()
    producer.begin_transaction()
    producer.produce(data, b"x" * 256, partition=0)
    producer.flush(TIMEOUT_S)
    if member is not None:
        offsets = [TopicPartition(slots, slot, 1) for slot in sorted(member.held)]
        producer.send_offsets_to_transaction(offsets, member.metadata, TIMEOUT_S)
    producer.commit_transaction(TIMEOUT_S)
    return time.perf_counter() - began


def measure(bootstrap: str, transactions: int, retry_backoff_ms: int) -> dict[str, Any]:
    run = uuid.uuid4().hex[:8]
    slots, data, group = f"fencing-slots-{run}", f"fencing-data-{run}", f"fencing-owners-{run}"
    rawkafka.create_topic(bootstrap, slots, SLOTS)
    rawkafka.create_topic(bootstrap, data, 1)
    owner = Member(bootstrap, group, slots, "first")
    if not owner.wait_for(SLOTS, 30):
        raise SystemExit("the first member was never given the slots")
    producer = rawkafka.producer(
        bootstrap,
        **{
            "transactional.id": f"fencing-{run}",
            "linger.ms": 0,
            "retry.backoff.ms": retry_backoff_ms,
        },
    )
    producer.init_transactions(TIMEOUT_S)
    for _ in range(20):  # warm both paths
        transaction(producer, data, slots, None)
        transaction(producer, data, slots, owner)
    plain: list[float] = []
    fenced: list[float] = []
    for _ in range(transactions):  # alternating, so both see the same machine
        plain.append(transaction(producer, data, slots, None))
        fenced.append(transaction(producer, data, slots, owner))
    latency = {
        "plain_p50_ms": rawkafka.percentile_ms(plain, 0.5),
        "plain_p99_ms": rawkafka.percentile_ms(plain, 0.99),
        "offsets_p50_ms": rawkafka.percentile_ms(fenced, 0.5),
        "offsets_p99_ms": rawkafka.percentile_ms(fenced, 0.99),
        "ratio_p50": round(statistics.median(fenced) / statistics.median(plain), 2),
    }
    return {
        "latency": latency,
        "stable": _stable(bootstrap, producer, data, slots, group, owner),
        "fenced": _fenced(bootstrap, producer, data, slots, group, owner),
    }


def _stable(
    bootstrap: str, producer: Producer, data: str, slots: str, group: str, owner: Member
) -> dict[str, Any]:
    """Hold a transaction with offsets open for a second; how long a fetch of them waits,
    beside one with nothing open."""
    reader = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed"}
    )
    began = time.perf_counter()
    reader.committed([TopicPartition(slots, 0)], timeout=20)
    nothing_open = time.perf_counter() - began
    producer.begin_transaction()
    producer.produce(data, b"open", partition=0)
    producer.send_offsets_to_transaction([TopicPartition(slots, 0, 7)], owner.metadata, TIMEOUT_S)
    producer.flush(TIMEOUT_S)
    began = time.perf_counter()
    committing = threading.Timer(1.0, producer.commit_transaction, args=(TIMEOUT_S,))
    committing.start()
    fetched = reader.committed([TopicPartition(slots, 0)], timeout=20)
    waited = time.perf_counter() - began
    committing.join()
    reader.close()
    return {
        "held_open_s": 1.0,
        "fetch_waited_s": round(waited, 2),
        "fetch_with_nothing_open_s": round(nothing_open, 2),
        "offset": fetched[0].offset,
    }


def _fenced(
    bootstrap: str, producer: Producer, data: str, slots: str, group: str, owner: Member
) -> dict[str, Any]:
    """The owner stops polling and a second member joins, ending its generation; then the
    owner's transaction sends offsets with its old metadata."""
    stale = owner.metadata
    owner.stop_polling()
    Member(bootstrap, group, slots, "second")
    time.sleep(8)  # the rebalance the second member's join starts
    producer.begin_transaction()
    producer.produce(data, b"stale", partition=0)
    try:
        producer.send_offsets_to_transaction([TopicPartition(slots, 0, 9)], stale, TIMEOUT_S)
        producer.commit_transaction(TIMEOUT_S)
    except KafkaException as error:
        inner: KafkaError = error.args[0]
        if inner.txn_requires_abort():
            producer.abort_transaction(TIMEOUT_S)
        return {"refused": inner.name(), "abortable": inner.txn_requires_abort()}
    return {"refused": None, "committed": True}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--transactions", type=int, default=200)
    parser.add_argument("--retry-backoff-ms", type=int, default=5)
    args = parser.parse_args()
    print(json.dumps(measure(args.bootstrap_servers, args.transactions, args.retry_backoff_ms)))


if __name__ == "__main__":
    main()
