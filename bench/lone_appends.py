"""Where a lone append's time goes: one writer, one append at a time, a pause between them.

The latency an SSE subscriber sees is its append's (`bench/sse_fanout.py` reports both): this
splits it. One durable-kafka instance on the broker given, one stream; `--appends` appends of
`--size` bytes, `--pause` ms apart on one kept-alive connection, each timed by the client,
after a warm-up. Prints one JSON object: the client's p50/p90/p99, and from the server's own
histograms over the same appends (read before and after) the mean request time and the means
of the Kafka transaction's `produce` (begin, produce, flush) and `commit` stages; what is left
of the request time is the server's own work and its hand-overs between the event loop and the
writer's thread.

    .venv/bin/python -m bench.lone_appends --bootstrap-servers 127.0.0.1:9092 [--appends 600]
"""

from __future__ import annotations

import argparse
import http.client
import json
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from urllib.parse import urlsplit

from bench import targets, timeline
from bench.timeline import STAGE
from devstack.process import free_port

REQUESTS = "durable_kafka_http_request_duration_seconds"
APPEND_ROUTE = 'route="/v1/stream/{path}"'


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--appends", type=int, default=600)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--pause", type=float, default=20.0, help="ms between appends")
    args = parser.parse_args()
    ops_port = free_port()
    prefix = f"bench.lone.{uuid.uuid4().hex[:8]}."
    options = targets.TargetOptions(args.bootstrap_servers, prefix, 60_000, 0, ops_port=ops_port)
    log_dir = Path(tempfile.mkdtemp(prefix="lone-appends-"))
    server = targets.start(targets.DURABLE_KAFKA, log_dir, options)
    try:
        print(json.dumps(_measure(server.url, f"http://127.0.0.1:{ops_port}", args), indent=1))
    finally:
        targets.stop(server)


def _measure(url: str, ops_url: str, args: argparse.Namespace) -> dict[str, object]:
    client = _Client(f"{url}/v1/stream/lone")
    client.send("PUT", b"")
    body = b"x" * args.size
    for _ in range(args.warmup):
        client.send("POST", body)
    before = _totals(ops_url)
    latencies: list[float] = []
    for _ in range(args.appends):
        began = time.perf_counter()
        client.send("POST", body)
        latencies.append((time.perf_counter() - began) * 1000)
        time.sleep(args.pause / 1000)
    after = _totals(ops_url)
    latencies.sort()

    def mean_ms(series: str) -> float | None:
        (total_after, count_after), (total_before, count_before) = after[series], before[series]
        count = count_after - count_before
        return round((total_after - total_before) / count * 1000, 3) if count else None

    return {
        "appends": args.appends,
        "pause_ms": args.pause,
        "client_ms": {q: round(latencies[int(len(latencies) * p)], 3) for q, p in _QUANTILES},
        "server_request_mean_ms": mean_ms("append"),
        "produce_stage_mean_ms": mean_ms("produce"),
        "commit_stage_mean_ms": mean_ms("commit"),
    }


_QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))


class _Client:
    """One kept-alive connection, as a writer holds."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.path = parts.path
        self.connection = http.client.HTTPConnection(parts.netloc, timeout=30)

    def send(self, method: str, body: bytes) -> None:
        self.connection.request(method, self.path, body, {"Content-Type": "text/plain"})
        reply = self.connection.getresponse()
        reply.read()
        if reply.status >= 300:
            raise RuntimeError(f"{method} {self.path}: {reply.status}")


def _totals(ops_url: str) -> dict[str, tuple[float, float]]:
    """Seconds and count so far of the append route's requests and of each Kafka stage."""
    with urllib.request.urlopen(f"{ops_url}/metrics") as reply:
        metrics = timeline.parse_metrics(reply.read().decode())
    totals = {
        stage: (
            metrics.get(STAGE.format("sum", stage), 0.0),
            metrics.get(STAGE.format("count", stage), 0.0),
        )
        for stage in ("produce", "commit")
    }
    appends = [0.0, 0.0]
    for name, value in metrics.items():
        if APPEND_ROUTE in name and 'method="POST"' in name:
            for index, kind in enumerate(("_sum{", "_count{")):
                appends[index] += value if name.startswith(REQUESTS + kind) else 0.0
    totals["append"] = (appends[0], appends[1])
    return totals


if __name__ == "__main__":
    main()
