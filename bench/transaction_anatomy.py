"""Where one write transaction's time goes on a quiet broker: the floor of an append's latency.

An append is one transaction holding a data record and its stream's state record (two
partitions, as durable-kafka writes them). This times, one at a time with a pause between:

- `plain`: both records produced and flushed by an idempotent producer, no transaction;
- `transaction`: begin, both records, flush (the writer's "produce" stage), commit;

and, from librdkafka's own debug log (`debug=eos,protocol`) of more transactions on a producer
of their own, the steps inside the produce stage: how long the client waits after a record
marks its partition before it sends AddPartitionsToTxn, that request's round trip (as
librdkafka measured it), and the time from its answer to the last produce's answer. The log
lines are timed as `flush()` serves them, as they come; the first is emitted just before it,
so the wait is if anything short.

    .venv/bin/python -m bench.transaction_anatomy --bootstrap-servers 127.0.0.1:9092
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import time
import uuid
from collections.abc import Callable

from confluent_kafka import KafkaError, KafkaException, Producer

from bench.rawkafka import TIMEOUT_S, create_topic, percentile_ms, producer

# librdkafka's debug lines that mark the steps of one transaction's produce stage.
STEPS = {
    "marked": re.compile(r"Marked .* as part of transaction: scheduling registration"),
    "add_sent": re.compile(r"Sent AddPartitionsToTxnRequest"),
    "add_answered": re.compile(r"Received AddPartitionsToTxnResponse"),
    "produced": re.compile(r"Received ProduceResponse"),
}
# The round trip librdkafka itself measured for AddPartitionsToTxn.
ADD_RTT = re.compile(r"Received AddPartitionsToTxnResponse .*rtt ([0-9.]+)ms")


class _Steps(logging.Handler):
    """Keeps each debug line's arrival time, for the transactions being traced."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[tuple[float, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((time.perf_counter(), record.getMessage()))


def _timed(count: int, pause_s: float, once: Callable[[], float]) -> list[float]:
    """`once` returns the seconds of the part measured; a tenth of `count` first, untimed."""
    for _ in range(max(1, count // 10)):
        once()
        time.sleep(pause_s)
    samples = []
    for _ in range(count):
        samples.append(once())
        time.sleep(pause_s)
    return samples


def _flush(sink: Producer) -> None:
    if sink.flush(TIMEOUT_S):
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT))


def run(bootstrap: str, count: int, pause_s: float, traced: int) -> dict[str, object]:
    data, state = f"bench-anatomy-{uuid.uuid4().hex[:8]}", f"bench-anatomy-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, data, 1)
    create_topic(bootstrap, state, 1)
    body = b"x" * 256

    def both(sink: Producer) -> None:
        sink.produce(data, body, partition=0)
        sink.produce(state, b"s" * 100, key=b"stream", partition=0)

    plain = producer(bootstrap, **{"linger.ms": 0})

    def plain_once() -> float:
        began = time.perf_counter()
        both(plain)
        _flush(plain)
        return time.perf_counter() - began

    txn = _transactional(bootstrap)
    stages: dict[str, list[float]] = {"produce": [], "commit": []}

    def txn_once() -> float:
        began = time.perf_counter()
        txn.begin_transaction()
        both(txn)
        _flush(txn)
        flushed = time.perf_counter()
        txn.commit_transaction(TIMEOUT_S)
        ended = time.perf_counter()
        stages["produce"].append(flushed - began)
        stages["commit"].append(ended - flushed)
        return ended - began

    plain_s = _timed(count, pause_s, plain_once)
    txn_s = _timed(count, pause_s, txn_once)
    stages = {name: samples[-count:] for name, samples in stages.items()}
    # Traced on a producer of its own: serving its debug log would slow the timed ones.
    steps = _Steps()
    logger = logging.getLogger("bench.transaction_anatomy.librdkafka")
    logger.addHandler(steps)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    traced_txn = _transactional(bootstrap, debug="eos,protocol", logger=logger)
    inside = _trace(traced_txn, both, steps, traced, pause_s)
    return {
        "plain_flush": _spread(plain_s),
        "transaction": _spread(txn_s),
        "produce_stage": _spread(stages["produce"]),
        "commit_stage": _spread(stages["commit"]),
        "inside_produce_stage": {step: _spread(samples) for step, samples in inside.items()},
        "transactions": count,
    }


def _transactional(bootstrap: str, **extra: object) -> Producer:
    config: dict[str, object] = {"linger.ms": 0, "transactional.id": f"bench-{uuid.uuid4().hex}"}
    txn = producer(bootstrap, **(config | extra))
    txn.init_transactions(TIMEOUT_S)
    return txn


def _trace(
    txn: Producer, write: Callable[[Producer], None], steps: _Steps, traced: int, pause_s: float
) -> dict[str, list[float]]:
    """The steps inside the produce stage of `traced` transactions, from librdkafka's log."""
    inside: dict[str, list[float]] = {"wait_before_add": [], "add_rtt": [], "add_to_produced": []}
    for _ in range(traced):
        txn.begin_transaction()
        steps.lines.clear()
        write(txn)
        _flush(txn)
        txn.commit_transaction(TIMEOUT_S)
        seen: dict[str, float] = {}
        rtts = [float(m.group(1)) / 1000 for _, line in steps.lines if (m := ADD_RTT.search(line))]
        for at, line in steps.lines:
            for step, pattern in STEPS.items():
                if pattern.search(line):  # the last produce answered; the first of the others
                    seen[step] = at if step == "produced" else seen.get(step, at)
        if seen.keys() == STEPS.keys():
            inside["wait_before_add"].append(seen["add_sent"] - seen["marked"])
            inside["add_rtt"].append(rtts[0] if rtts else seen["add_answered"] - seen["add_sent"])
            inside["add_to_produced"].append(seen["produced"] - seen["add_answered"])
        time.sleep(pause_s)
    return inside


def _spread(samples: list[float]) -> dict[str, float | None]:
    return {
        "p50_ms": percentile_ms(samples, 0.50),
        "p99_ms": percentile_ms(samples, 0.99),
        "mean_ms": round(sum(samples) / len(samples) * 1000, 3) if samples else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--count", type=int, default=300, help="transactions timed")
    parser.add_argument("--pause-ms", type=float, default=20, help="between transactions")
    parser.add_argument("--traced", type=int, default=50, help="transactions traced")
    args = parser.parse_args(argv)
    result = run(args.bootstrap_servers, args.count, args.pause_ms / 1000, args.traced)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
