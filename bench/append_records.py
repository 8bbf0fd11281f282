"""What one append costs in Kafka records and server CPU: closed-loop appends (100 streams,
256 B) on one durable-kafka instance, counting the records every topic of its prefix gained.

Each topic's records are counted by reading the range the run added with a read_uncommitted
consumer (which skips transaction markers), so the figures are records, not offsets; appends
still in flight when a run's window closes are written but not counted (at most `--streams`).
Prints one JSON object: per run the appends answered, the records per append of each topic, the
meta topic's records per second, and the server's CPU per append (process CPU seconds / appends,
not rates: the machine is shared). With `--producer` each run's producers are new ones (a run
repeating an earlier run's ids and seqs would be answered as duplicates, writing nothing).

With `--instances 2` a second instance runs on the same prefix and takes no request, and the
deployment has one write slot, owned by the instance the appends go to: the second's CPU per
append is then what following the first's appends costs it, nothing else. With `--py-spy` the
first measured run is profiled (the thread holding the GIL) and the share of samples spent on
state records, written and followed, is reported with it (`STATE_FRAMES`).

    .venv/bin/python -m bench.append_records --bootstrap-servers 127.0.0.1:9092 [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from bench import loadgen_run, profiling, suite_servers, targets

# Frames (function, end of the file's path) that write or follow state records.
STATE_FRAMES = (
    ("_produce_state", "adapter/log/writer.py"),
    ("write_entries", "adapter/service/state_entries.py"),
    ("_follow_one", "adapter/state/follower.py"),
    ("_poll", "adapter/state/follower.py"),
    ("wrote", "adapter/state/follower.py"),
    ("settled", "adapter/state/follower.py"),
)

Offsets = dict[tuple[str, int], int]


def main() -> None:
    args = _parser().parse_args()
    binary = loadgen_run.build()
    prefix = f"bench.records.{uuid.uuid4().hex[:8]}."
    log_dir = Path(tempfile.mkdtemp(prefix="append-records-"))
    options = targets.TargetOptions(args.bootstrap_servers, prefix, 60_000, 0)
    if args.instances > 1:
        os.environ["DURABLE_KAFKA_WRITE_SLOTS"] = "1"  # inherited by the servers only
    servers = [
        targets.start(targets.DURABLE_KAFKA, log_dir / str(index), options)
        for index in range(args.instances)
    ]
    try:
        server, *followers = _owner_first(servers)
        _append(binary, args, server, args.warmup, 2)  # a new bucket's first seconds: not kept
        runs = [_run(binary, args, server, followers, prefix, i) for i in range(args.runs)]
    finally:
        for one in servers:
            targets.stop(one)
    print(json.dumps({"streams": args.streams, "producer": args.producer, "runs": runs}, indent=1))


def _parser() -> argparse.ArgumentParser:
    parser = loadgen_run.load_parser(__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--producer", action="store_true", help="idempotent-producer headers")
    parser.add_argument("--instances", type=int, choices=(1, 2), default=1)
    parser.add_argument("--py-spy", help="py-spy's path: profile the first measured run")
    return parser


def _append(
    binary: Path, args: argparse.Namespace, server: targets.Server, warmup: float, seconds: float
) -> dict[str, Any]:
    """Closed-loop appends; the generator's report. A measured run has no warm-up: the records
    counted are those of the appends answered."""
    flags: dict[str, object] = {"mode": "append", "base": server.url, "streams": args.streams}
    flags |= {"size": args.size, "create": True, "warmup": warmup, "duration": seconds}
    flags |= {"producer": args.producer, "producer-tag": uuid.uuid4().hex[:8]}
    flags["server-pids"] = ",".join(str(pid) for pid in targets.process_tree(server.pid))
    report: dict[str, Any] = loadgen_run.run(binary, flags, timeout_s=300 + 4 * seconds).report
    return report


def _owner_first(servers: list[targets.Server], timeout_s: float = 60) -> list[targets.Server]:
    """The servers, the one owning the write slots first, once they are divided."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = [_ownership(server) for server in servers]
        if suite_servers.settled(found):
            owners = [s for s, o in zip(servers, found, strict=True) if o is not None and o.owned]
            if len(owners) == 1:
                return [owners[0], *(s for s in servers if s is not owners[0])]
        if time.monotonic() > deadline:
            raise targets.TargetError(f"the write slot was not owned by one instance: {found}")
        time.sleep(0.5)


def _ownership(server: targets.Server) -> suite_servers.Ownership | None:
    try:
        with urllib.request.urlopen(f"{server.url}/readyz", timeout=2) as reply:
            return suite_servers.ownership(json.loads(reply.read()))
    except OSError:
        return None


def _run(
    binary: Path,
    args: argparse.Namespace,
    server: targets.Server,
    followers: list[targets.Server],
    prefix: str,
    index: int,
) -> dict[str, object]:
    before = _ends(args.bootstrap_servers, prefix)
    spent = [_cpu_s(follower) for follower in followers]
    stacks = Path(tempfile.mkdtemp(prefix="append-records-profile-")) / "stacks.txt"
    profiled = None
    if args.py_spy and index == 0:
        profiled = profiling.record(args.py_spy, server.pid, args.duration, stacks)
    report = _append(binary, args, server, 0, args.duration)
    profile = {}
    if profiled is not None and profiling.finish(profiled, stacks) is not None:
        profile = {"profile": str(stacks), "state_record_share": _state_share(stacks)}
    spent = [_cpu_s(follower) - was for follower, was in zip(followers, spent, strict=True)]
    after = _ends(args.bootstrap_servers, prefix)
    ok = max(int(report["ok"]), 1)
    records = _records(args.bootstrap_servers, before, after)
    meta = sum(count for topic, count in records.items() if topic.endswith("meta"))
    offsets = sum(end - before.get(place, 0) for place, end in after.items())
    return {
        "appends": ok,
        "rate": round(float(report["rate"]), 1),
        "records_per_append": {topic: round(n / ok, 3) for topic, n in sorted(records.items())},
        "all_records_per_append": round(sum(records.values()) / ok, 3),
        # Offsets no record holds: a commit marker per partition a transaction wrote.
        "markers_per_append": round((offsets - sum(records.values())) / ok, 3),
        "meta_records_per_s": round(meta / float(report["seconds"]), 1),
        "server_cpu_us_per_append": round(float(report["server_cpu_s"]) / ok * 1e6, 1),
        "follower_cpu_us_per_append": [round(cpu / ok * 1e6, 1) for cpu in spent],
    } | profile


def _state_share(stacks: Path) -> float:
    """The share of GIL samples with a state-record frame on the stack."""
    total = state = 0
    for line in profiling.records(stacks.read_text()):
        stack, _, count = line.rpartition(" ")
        total += int(count)
        if any(_is_state(frame) for frame in stack.split(";")):
            state += int(count)
    return round(state / max(total, 1), 3)


def _is_state(frame: str) -> bool:
    """Whether a py-spy frame, `function (path:line)`, is one of `STATE_FRAMES`."""
    function, _, where = frame.partition(" (")
    path = where.rpartition(":")[0]
    name = function.rpartition(".")[2]  # a method's frame is `Class.method`
    return any(name == f and path.endswith(suffix) for f, suffix in STATE_FRAMES)


def _cpu_s(server: targets.Server) -> float:
    return sum(targets.cpu_seconds(pid) for pid in targets.process_tree(server.pid))


def _ends(bootstrap: str, prefix: str) -> Offsets:
    """The high watermark of every partition of the prefix's topics."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = admin.list_topics(timeout=30).topics
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        ends: Offsets = {}
        for name, topic in topics.items():
            if name.startswith(prefix):
                for partition in topic.partitions:
                    tp = TopicPartition(name, partition)
                    ends[(name, partition)] = consumer.get_watermark_offsets(tp, timeout=30)[1]
        return ends
    finally:
        consumer.close()


def _records(bootstrap: str, before: Offsets, after: Offsets) -> dict[str, int]:
    """The records (not markers) each topic gained between `before` and `after`."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
        | {"isolation.level": "read_uncommitted", "enable.partition.eof": True}
    )
    counts: dict[str, int] = {}
    try:
        for (topic, partition), end in after.items():
            start = before.get((topic, partition), 0)
            counts[topic] = counts.get(topic, 0) + _count(consumer, topic, partition, start, end)
        return counts
    finally:
        consumer.close()


def _count(consumer: Consumer, topic: str, partition: int, start: int, end: int) -> int:
    if end <= start:
        return 0
    consumer.assign([TopicPartition(topic, partition, start)])
    seen = 0
    while True:
        message = consumer.poll(10)
        if message is None:
            raise RuntimeError(f"{topic}[{partition}]: no record before offset {end}")
        if message.error() is not None:  # the partition's end: control records counted none
            break
        offset = message.offset() or 0
        if offset >= end:
            break
        seen += 1
        if offset == end - 1:
            break
    return seen


if __name__ == "__main__":
    main()
