"""A takeover behind quiet streams, with and without covered offsets, in one run.

`--quiet` streams (enough to have one in each partition) take one append each and then none;
`--streams` others take closed-loop appends for `--age` seconds, on instance A. A stops (a
clean stop: its slots are handed over); instance B starts alone and takes every slot over, from
the covered offsets A's checkpoints committed (`adapter/state/covered_offsets.py`). B stops;
the group holding those offsets is deleted, and instance C takes every slot over again from the
same state, as an instance does when no covered offset is committed: each partition scanned
from the lowest tail among its streams, a quiet stream's. Prints one JSON object: the records
each takeover read, the slowest slot's milliseconds and all slots' (taken over one after
another; from the `write slot K: … carried forward over R records … in M ms` lines), and the
ratios.

    .venv/bin/python -m bench.takeover_quiet --bootstrap-servers HOST:PORT [--age 60]
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import urllib.request
import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient

from bench import loadgen_run, targets
from bench.takeover_scan import load
from topology.naming import bucket_topic

_TAKEOVER = re.compile(r"carried forward over (\d+) records \(\d+ changed\) in (\d+) ms")
BUCKET = "_default"  # the load generator's


def main() -> None:
    args = _parser().parse_args()
    binary = loadgen_run.build()
    prefix = f"bench.quiet.{uuid.uuid4().hex[:8]}."
    log_dir = Path(tempfile.mkdtemp(prefix="takeover-quiet-"))
    options = targets.TargetOptions(args.bootstrap_servers, prefix, 60_000, 0)
    writer = targets.start(targets.DURABLE_KAFKA, log_dir / "a", options)
    try:
        load(binary, args, writer, seconds=1)  # creates the busy streams
        for quiet in (f"quiet-{n}" for n in range(args.quiet)):
            _request(writer.url, "PUT", quiet, b"")
            _request(writer.url, "POST", quiet, b"q" * 256)
        report = load(binary, args, writer, seconds=args.age)
    finally:
        targets.stop(writer)
    listening = targets.TargetOptions(args.bootstrap_servers, prefix, 60_000, 0, log_level="info")
    covered = _takeover(log_dir / "b", listening)
    admin = AdminClient({"bootstrap.servers": args.bootstrap_servers})
    for future in admin.delete_consumer_groups([f"{prefix}covered"], request_timeout=30).values():
        future.result()
    uncovered = _takeover(log_dir / "c", listening)
    print(
        json.dumps(
            {
                "topic": bucket_topic(prefix, BUCKET),
                "busy_streams": args.streams,
                "quiet_streams": args.quiet,
                "appends": report["ok"],
                "covered": covered,
                "without_covered_offsets": uncovered,
                "records_ratio": round(covered["records"] / max(uncovered["records"], 1), 4),
                "all_slots_ms_ratio": round(
                    covered["all_slots_ms"] / max(uncovered["all_slots_ms"], 1), 4
                ),
            },
            indent=1,
        )
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--streams", type=int, default=100, help="busy streams")
    parser.add_argument("--quiet", type=int, default=50, help="streams appended to once")
    parser.add_argument("--age", type=float, default=60, help="seconds of appends")
    return parser


def _request(base: str, method: str, stream: str, body: bytes) -> None:
    request = urllib.request.Request(
        f"{base}/{BUCKET}/{stream}",
        data=body,
        method=method,
        headers={"Content-Type": "application/octet-stream"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        answer.read()


def _takeover(log_dir: Path, options: targets.TargetOptions) -> dict[str, int]:
    """Start an instance alone (it takes every slot over once ready), stop it, and sum what
    its takeover lines say."""
    server = targets.start(targets.DURABLE_KAFKA, log_dir, options)
    targets.stop(server)
    found = [_TAKEOVER.search(line) for line in server.log_path.read_text().splitlines()]
    lines = [(int(m.group(1)), int(m.group(2))) for m in found if m is not None]
    return {
        "slots": len(lines),
        "records": sum(records for records, _ms in lines),
        "slowest_slot_ms": max((ms for _records, ms in lines), default=0),
        "all_slots_ms": sum(ms for _records, ms in lines),  # one after another
    }


if __name__ == "__main__":
    main()
