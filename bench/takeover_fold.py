"""What rebuilding a write slot's streams from a checkpoint and the records after it costs the
server's CPU, without Kafka: `adapter/protocol/stream_log.recover` for every stream of a slot,
over the records a scan would hand it (their headers parsed as read from the partition).

The fetch is not in it (a scan of a few MB from the broker); this is the part the takeover's
bound depends on as the streams grow. Prints one JSON object: streams, records, CPU seconds of
the header parsing and of the recovery, and CPU µs per record.

    .venv/bin/python -m bench.takeover_fold [--streams 10000] [--records 30000]
"""

from __future__ import annotations

import argparse
import json
import random
import time

from adapter.protocol.model import StreamMeta
from adapter.protocol.stream_log import LoggedRecord, StreamState, logged_record, recover
from topology.wire import Headers, ProducerStamp, data_headers

NOW = 1_700_000_000_000


def main() -> None:
    args = _parser().parse_args()
    rng = random.Random(args.seed)
    streams = [_meta(index) for index in range(args.streams)]
    read = _scanned(rng, args)
    started = time.process_time()
    records: dict[int, list[LoggedRecord]] = {}
    for offset, (stream, headers) in enumerate(read, start=args.streams):
        records.setdefault(stream, []).append(logged_record(offset, NOW + offset, headers))
    parsed = time.process_time()
    checkpointed = [StreamState(meta) for meta in streams]
    for index, meta in enumerate(streams):
        recover(meta, {}, checkpointed[index], records.get(index, ()))
    done = time.process_time()
    report = {
        "streams": args.streams,
        "records": args.records,
        "parse_cpu_s": round(parsed - started, 3),
        "recover_cpu_s": round(done - parsed, 3),
        "cpu_us_per_record": round((done - started) / max(args.records, 1) * 1e6, 2),
    }
    print(json.dumps(report, indent=1))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=10_000)
    parser.add_argument("--records", type=int, default=30_000, help="after the checkpoint")
    parser.add_argument("--seed", type=int, default=1)
    return parser


def _meta(index: int) -> StreamMeta:
    return StreamMeta("bucket", f"stream-{index}", 0, "text/plain", NOW, index, index + 1, NOW, NOW)


def _scanned(rng: random.Random, args: argparse.Namespace) -> list[tuple[int, Headers]]:
    """(stream, headers) of each record after the checkpoint; half with a producer."""
    read = []
    for seq in range(args.records):
        stream = rng.randrange(args.streams)
        producer = ProducerStamp(f"p-{stream}", 0, seq) if seq % 2 else None
        read.append((stream, data_headers("text/plain", producer)))
    return read


if __name__ == "__main__":
    main()
