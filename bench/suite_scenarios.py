"""The suite's scenarios: what the Go generator (or the raw-Kafka process) runs for each row."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, replace

from bench import targets

MIB = 2**20

LATENCY, RATE, MBPS = "latency", "rate", "mb_per_s"


@dataclass(frozen=True)
class Scenario:
    """One row per target: generator flags, and the raw-Kafka equivalent's flags if any."""

    name: str
    metric: str  # LATENCY: p50/p99 ms; RATE: successful requests/s; MBPS: MB/s read
    what: str
    loadgen: dict[str, object]
    raw: dict[str, object] | None = None  # bench.rawkafka flags, "mode" included
    setup: dict[str, object] | None = None  # a generator run before the repetitions
    fresh_prefix: bool = False  # new stream names every repetition
    targets_only: tuple[str, ...] = field(default=())  # empty: every HTTP target
    floor: bool = False  # also run against the Python floors (bench/floor_server.py)

    def runs_on(self, target: str) -> bool:
        if self.targets_only:
            return target in self.targets_only
        return self.floor or target not in targets.FLOORS

    def with_raw(self, raw: dict[str, object]) -> Scenario:
        return replace(self, raw=raw)

    def timeout_s(self, args: argparse.Namespace) -> float:
        return 120.0 + 4 * float(args.warmup + args.duration)


def latency(name: str, kind: str, what: str, count: int, **extra: object) -> Scenario:
    flags: dict[str, object] = {"mode": "latency", "kind": kind, "count": count} | extra
    return Scenario(name, LATENCY, what, flags, fresh_prefix=True)


def append_load(
    args: argparse.Namespace, streams: int, writers: int = 1, **extra: object
) -> dict[str, object]:
    flags: dict[str, object] = {"mode": "append", "streams": streams, "writers": writers}
    flags |= {"size": 100, "create": True, "warmup": args.warmup, "duration": args.duration}
    return flags | extra


def raw_load(args: argparse.Namespace, keys: int, size: int = 100) -> dict[str, object]:
    return {
        "mode": "throughput",
        "keys": keys,
        "size": size,
        "warmup": args.warmup,
        "duration": args.duration,
    }


def catalogue(args: argparse.Namespace) -> list[Scenario]:
    n = args.latency_ops
    small, many = args.streams_small, args.streams_many
    moderate = append_load(args, small) | {"mode": "rate", "rate": args.moderate_rate}
    catchup_fill = {"mode": "latency", "kind": "append", "size": MIB, "count": args.catchup_mib}
    catchup_fill["warm-ops"] = 0
    return [
        latency("append-latency", "append", "one 100 B append at a time", n, size=100).with_raw(
            {"mode": "latency", "count": n, "size": 100}
        ),
        Scenario(
            "kafka-txn-commit",
            LATENCY,
            "one Kafka transaction (1 record) at a time: the group-commit floor",
            {},
            raw={"mode": "transaction", "count": n, "size": 100},
            targets_only=("raw-kafka",),
        ),
        latency("create-latency", "create", "one PUT of a new stream at a time", n),
        latency("read-latency", "read", "GET of a 10-message stream from the start", n),
        latency("roundtrip-latency", "roundtrip", "append → a waiting long-poll answers", n // 2),
        latency("sse-first-event", "sse", "SSE connect → first data event", n // 2),
        Scenario(
            f"append-{small}-streams",
            RATE,
            f"{small} streams x 1 writer, 100 B, closed loop",
            append_load(args, small),
            raw=raw_load(args, small),
            floor=True,
        ),
        Scenario(
            f"append-{many}-streams",
            RATE,
            f"{many} streams x 1 writer, 100 B, closed loop",
            append_load(args, many),
            raw=raw_load(args, many),
            floor=True,
        ),
        Scenario(
            "append-hot-stream",
            RATE,
            f"1 stream x {small} writers, 100 B, closed loop",
            append_load(args, 1, writers=small),
            raw=raw_load(args, 1),
            floor=True,
        ),
        Scenario(
            f"append-{small}-streams-producer",
            RATE,
            f"as append-{small}-streams, with Producer-Id/Epoch/Seq",
            append_load(args, small, producer=True),
        ),
        Scenario(
            "append-moderate",
            LATENCY,
            f"{args.moderate_rate:g} appends/s open loop over {small} streams",
            moderate,
            floor=True,
        ),
        Scenario(
            "append-moderate-producer",
            LATENCY,
            "as append-moderate, with producer headers",
            moderate | {"producer": True},
        ),
        Scenario(
            "append-1mib",
            MBPS,
            f"{args.large_streams} streams x 1 writer, 1 MiB appends, closed loop",
            append_load(args, args.large_streams, size=MIB, timeout=60),
            raw=raw_load(args, args.large_streams, size=MIB),
        ),
        Scenario(
            "catchup-read",
            MBPS,
            f"read a {args.catchup_mib} MiB stream (1 MiB appends) from the start",
            {"mode": "catchup", "count": 1, "timeout": 60, "expect-bytes": args.catchup_mib * MIB},
            raw={"mode": "catchup", "size": MIB, "count": args.catchup_mib, "reads": 1},
            setup=catchup_fill,
        ),
    ]
