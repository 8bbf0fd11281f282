"""Raw Kafka on the same broker (confluent-kafka, acks=all, idempotent): the floor HTTP adds to.

Run as its own process by bench.suite (`python -m bench.rawkafka MODE ...`); prints one JSON
report like the Go generator's: ok, errors, seconds, rate, mb_per_s, p50/p99 ms, cpu_s.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

TIMEOUT_S = 30.0


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def percentile_ms(samples: list[float], q: float) -> float | None:
    if not samples:
        return None  # throughput rows count deliveries; they time no single record
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 3)


def report(
    ok: int, errors: int, seconds: float, size: int, samples: list[float], cpu: float
) -> dict[str, Any]:
    return {
        "ok": ok,
        "errors": errors,
        "seconds": seconds,
        "rate": ok / seconds if seconds else 0.0,
        "mb_per_s": ok * size / seconds / 1e6 if seconds else 0.0,
        "p50_ms": percentile_ms(samples, 0.50),
        "p99_ms": percentile_ms(samples, 0.99),
        "cpu_s": cpu,
        "error_samples": [],
    }


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"max.message.bytes": str(8 * 2**20)}  # as durable-kafka's topics: 1 MiB records fit
    new = NewTopic(topic, partitions, 1, config=config)
    futures = admin.create_topics([new], operation_timeout=TIMEOUT_S)
    futures[topic].result(timeout=TIMEOUT_S)


def producer(bootstrap: str, **extra: object) -> Producer:
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        "message.max.bytes": 8 * 2**20,
    }
    return Producer(config | extra)


def warm_broker(bootstrap: str, seconds: float, producers: int = 8) -> tuple[str, int]:
    """Transactions of a few records, from several producers at once, for `seconds`: a broker
    started on an empty directory runs transactions 2-4x slower until its JIT has compiled
    their path, so whatever is measured first would pay for it. The topic written and the
    transactions committed (each of 6 records)."""
    topic = f"bench-warmup-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, producers)
    counts = [0] * producers

    def run(index: int) -> None:
        sink = producer(bootstrap, **{"linger.ms": 0, "transactional.id": f"{topic}-{index}"})
        sink.init_transactions(TIMEOUT_S)  # seconds on a broker just started: not counted
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            sink.begin_transaction()
            for _ in range(6):
                sink.produce(topic, b"w" * 100, partition=index)
            sink.commit_transaction(TIMEOUT_S)
            counts[index] += 1

    with ThreadPoolExecutor(producers) as pool:
        for running in [pool.submit(run, index) for index in range(producers)]:
            running.result()  # a producer that failed fails the warm-up, not silently
    return topic, sum(counts)


def throughput(args: argparse.Namespace) -> dict[str, Any]:
    """Produce `size`-byte records over `keys` keys as fast as delivery allows, for `duration`."""
    sink = producer(args.bootstrap, **{"queue.buffering.max.kbytes": 65536})
    body, counts = b"x" * args.size, {"ok": 0, "errors": 0, "measuring": False}

    def delivered(error: KafkaError | None, _message: Message) -> None:
        if counts["measuring"]:
            counts["errors" if error else "ok"] += 1

    phases = ((args.warmup, False), (args.duration, True))
    cpu, started = 0.0, 0.0
    for length, measuring in phases:
        counts["measuring"] = measuring
        if measuring:
            cpu, started = cpu_seconds(), time.monotonic()
        deadline, key = time.monotonic() + length, 0
        while time.monotonic() < deadline:
            try:
                sink.produce(args.topic, body, key=str(key % args.keys), on_delivery=delivered)
                key += 1
            except BufferError:
                sink.poll(0.001)
            sink.poll(0)
    counts["measuring"] = False  # deliveries after the window are not counted
    seconds = time.monotonic() - started
    sink.flush(TIMEOUT_S)
    return report(
        int(counts["ok"]), int(counts["errors"]), seconds, args.size, [], cpu_seconds() - cpu
    )


def sequential(args: argparse.Namespace, once: Callable[[], None]) -> dict[str, Any]:
    for _ in range(args.warm_ops):
        once()
    samples, cpu, started = [], cpu_seconds(), time.monotonic()
    for _ in range(args.count):
        began = time.monotonic()
        once()
        samples.append(time.monotonic() - began)
    seconds = time.monotonic() - started
    return report(len(samples), 0, seconds, args.size, samples, cpu_seconds() - cpu)


def latency(args: argparse.Namespace) -> dict[str, Any]:
    """One record produced and flushed at a time (acks=all)."""
    sink, body = producer(args.bootstrap, **{"linger.ms": 0}), b"x" * args.size

    def once() -> None:
        sink.produce(args.topic, body, key="k")
        if sink.flush(TIMEOUT_S):
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))

    return sequential(args, once)


def transaction(args: argparse.Namespace) -> dict[str, Any]:
    """One transaction holding one record, begun and committed at a time."""
    sink = producer(
        args.bootstrap, **{"linger.ms": 0, "transactional.id": f"bench-{uuid.uuid4().hex}"}
    )
    sink.init_transactions(TIMEOUT_S)
    body = b"x" * args.size

    def once() -> None:
        sink.begin_transaction()
        sink.produce(args.topic, body, key="k")
        sink.commit_transaction(TIMEOUT_S)

    return sequential(args, once)


def catchup(args: argparse.Namespace) -> dict[str, Any]:
    """Fill partition 0 with `count` records, then read them from the start `reads` times."""
    sink, body, failed = producer(args.bootstrap), b"x" * args.size, []

    def delivered(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            failed.append(error)

    for _ in range(args.count):
        sink.produce(args.topic, body, partition=0, on_delivery=delivered)
        sink.poll(0)
    if sink.flush(TIMEOUT_S) or failed:
        raise KafkaException(failed[0] if failed else KafkaError(KafkaError._TIMED_OUT))
    total, cpu, seconds = 0, 0.0, 0.0
    for _ in range(args.reads):
        consumer = Consumer(
            {
                "bootstrap.servers": args.bootstrap,
                "group.id": f"bench-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "fetch.max.bytes": 64 * 2**20,
                "max.partition.fetch.bytes": 16 * 2**20,
            }
        )
        consumer.assign([TopicPartition(args.topic, 0, 0)])
        began_cpu, began, got = cpu_seconds(), time.monotonic(), 0
        deadline = began + TIMEOUT_S
        while got < args.count and time.monotonic() < deadline:
            for message in consumer.consume(1000, 1.0):
                if message.error() is None:
                    got += 1
                    total += len(message.value() or b"")
        seconds += time.monotonic() - began
        cpu += cpu_seconds() - began_cpu
        consumer.close()
    result = report(args.count * args.reads, 0, seconds, 0, [], cpu)
    result["mb_per_s"] = total / seconds / 1e6 if seconds else 0.0
    return result


MODES: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
    "throughput": throughput,
    "latency": latency,
    "transaction": transaction,
    "catchup": catchup,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.rawkafka", description=__doc__)
    parser.add_argument("mode", choices=sorted(MODES))
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--create", action="store_true", help="create the topic first")
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--warmup", type=float, default=1)
    parser.add_argument("--duration", type=float, default=5)
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--warm-ops", type=int, default=10)
    parser.add_argument("--reads", type=int, default=3)
    args = parser.parse_args(argv)
    if args.create:
        create_topic(args.bootstrap, args.topic, args.partitions)
    print(json.dumps(MODES[args.mode](args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
