"""How long rebuilding streams from the records after a checkpoint takes against the broker:
the scan and fold a write slot's new owner makes (`adapter/state/stream_recovery.py`).

One durable-kafka takes closed-loop appends on `--streams` streams (created first, not timed)
for `--age` seconds: the records a checkpoint that old leaves to scan. Then every partition of
the bucket's topic, all slots' (an upper bound on one slot's), is scanned from where it stood
when the appends began to its end, each stream carried forward from a state at that point,
by one `PartitionScanner` as the server uses it. Prints one JSON object: streams, records
scanned, wall and CPU seconds of the rebuild.

    .venv/bin/python -m bench.takeover_scan --bootstrap-servers HOST:PORT [--streams 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from adapter.log.scanner import PartitionScanner
from adapter.protocol.model import StreamMeta
from adapter.protocol.stream_log import StreamState
from adapter.state.stream_recovery import recover_partition
from bench import loadgen_run, targets
from topology.kafka_client import KafkaAccess
from topology.naming import bucket_topic
from topology.placement import partition_for


def main() -> None:
    args = _parser().parse_args()
    binary = loadgen_run.build()
    prefix = f"bench.takeover.{uuid.uuid4().hex[:8]}."
    log_dir = Path(tempfile.mkdtemp(prefix="takeover-scan-"))
    options = targets.TargetOptions(args.bootstrap_servers, prefix, 60_000, 0)
    server = targets.start(targets.DURABLE_KAFKA, log_dir, options)
    topic = bucket_topic(prefix, "_default")
    try:
        load(binary, args, server, seconds=1)  # creates the streams
        starts = _ends(args.bootstrap_servers, topic)
        report = load(binary, args, server, seconds=args.age)
    finally:
        targets.stop(server)
    rebuilt = asyncio.run(_rebuild(args, prefix, topic, starts))
    print(json.dumps({"streams": args.streams, "appends": report["ok"]} | rebuilt, indent=1))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--streams", type=int, default=10_000)
    parser.add_argument("--age", type=float, default=10, help="the checkpoint's age, seconds")
    return parser


def load(
    binary: Path, args: argparse.Namespace, server: targets.Server, seconds: float
) -> dict[str, object]:
    flags: dict[str, object] = {"mode": "append", "base": server.url, "streams": args.streams}
    flags |= {"size": 256, "create": True, "warmup": 0, "duration": seconds}
    report: dict[str, object] = loadgen_run.run(binary, flags, timeout_s=1200).report
    return report  # closed-loop 256-byte appends to `args.streams` streams, created on the way


def _ends(bootstrap: str, topic: str) -> dict[int, int]:
    partitions = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in partitions.topics[topic].partitions
        }
    finally:
        consumer.close()


async def _rebuild(
    args: argparse.Namespace, prefix: str, topic: str, starts: dict[int, int]
) -> dict[str, object]:
    """Every stream carried forward from a state at `starts` over the records after it."""
    states: dict[int, dict[bytes, StreamState]] = {partition: {} for partition in starts}
    for index in range(args.streams):
        stream_id = f"loadgen-{index}"
        partition = partition_for(stream_id.encode(), len(starts))
        meta = StreamMeta("_default", stream_id, partition, "text/plain", 0, 0, 0, 0, 0)
        states[partition][stream_id.encode()] = StreamState(
            meta.evolve(next_offset=starts[partition])
        )
    scanner = PartitionScanner(KafkaAccess(args.bootstrap_servers, prefix), timeout_s=30)
    began, cpu = time.monotonic(), time.process_time()
    scanned = 0
    try:
        for partition, by_key in states.items():
            rebuilt = await recover_partition(scanner, topic, partition, by_key)
            scanned += sum(
                state.meta.message_count for state in rebuilt.values() if state is not None
            )
    finally:
        await scanner.close()
    return {
        "partitions": len(starts),
        "messages_rebuilt": scanned,
        "wall_s": round(time.monotonic() - began, 3),
        "cpu_s": round(time.process_time() - cpu, 3),
    }


if __name__ == "__main__":
    main()
