"""Mounted topics: one key's catch-up, SSE delivery from a plain producer, index memory.

A topic of `--records` records of `--value-bytes` across `--keys` keys (3 partitions, lz4) is
written by a plain producer, then mounted on an in-process adapter. Each figure is reported
with its reference measured in the same run:

- catch-up of one key over HTTP (`?offset=-1`, following `Stream-Next-Offset`) vs what a plain
  consumer without an index must do: read the whole topic, keeping that key's records;
- SSE delivery, a plain producer's record to the data event, vs a plain consumer assigned at
  the end of the key's partition receiving the same record;
- SSE delivery to a real browser (`--browser`, the default): Debian's Chromium under
  Playwright opens an `EventSource` on the key (same origin as the adapter); each record's value
  is the wall-clock time (ms) just before a plain producer's `produce()`, and the page computes
  `performance.timeOrigin + performance.now()` minus it at the data event (one machine, one
  clock);
- the key index's memory (`tracemalloc`) for `--memory-keys` keys of one record, per key and
  per million keys;
- a restart: the time from a new app to its mount's `caught_up`, and the records it read
  (the index resumes from its file in a temporary `mount_index_dir`).

`python -m bench.mount_catchup --help`; the figures kept are in `docs/performance.md`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import statistics
import tempfile
import time
import tracemalloc
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from adapter.app import create_app
from adapter.config import Settings
from adapter.log.key_index import KeyIndex
from adapter.log.key_index_store import KeyIndexStore, snapshot
from devstack.process import free_port
from topology.mount_positions import position

PARTITIONS = 3


def fill(bootstrap: str, topic: str, args: argparse.Namespace) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(60)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "compression.type": "lz4", "linger.ms": 20}
    )
    rng = random.Random(7)
    value = rng.randbytes(args.value_bytes)
    for n in range(args.records):
        while True:
            try:
                producer.produce(topic, value, f"key-{rng.randrange(args.keys):07d}".encode())
                break
            except BufferError:
                producer.poll(0.1)
        if n % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0


def scan_for_key(bootstrap: str, topic: str, key: bytes) -> tuple[float, int]:
    """The reference: a plain consumer reads the whole topic to find one key's records."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex}",
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    started = time.perf_counter()
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    found, at_end = 0, set[int]()
    while len(at_end) < PARTITIONS:
        for message in consumer.consume(1000, 1.0):
            error = message.error()
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                at_end.add(message.partition() or 0)
            elif error is None and message.key() == key:
                found += len(message.value() or b"")
    elapsed = time.perf_counter() - started
    consumer.close()
    return elapsed, found


async def catch_up(session: aiohttp.ClientSession, url: str) -> tuple[float, int]:
    started, size, offset = time.perf_counter(), 0, "-1"
    while True:
        async with session.get(url, params={"offset": offset}) as response:
            size += len(await response.read())
            offset = response.headers["Stream-Next-Offset"]
            if response.headers.get("Stream-Up-To-Date") == "true":
                return time.perf_counter() - started, size


async def sse_delivery(
    session: aiohttp.ClientSession, base: str, bootstrap: str, topic: str, key: bytes, samples: int
) -> tuple[list[float], list[float]]:
    """(adapter, reference) seconds from a plain producer's produce() to receipt."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    ours: list[float] = []
    url = f"{base}/{topic}/{key.decode()}"
    async with session.get(url, params={"offset": "now", "live": "sse"}) as response:
        for _ in range(samples):
            sent = time.perf_counter()
            producer.produce(topic, b"ping", key)
            producer.flush(10)
            while True:
                line = await asyncio.wait_for(response.content.readline(), 30)
                if line.startswith(b"data:") and not line.startswith(b"data:{"):
                    ours.append(time.perf_counter() - sent)
                    break
    partition = await asyncio.to_thread(_partition_of, bootstrap, topic, key)
    reference = await asyncio.to_thread(_plain_delivery, bootstrap, topic, key, partition, samples)
    return ours, reference


BROWSER_TAIL = """(url) => {
  window.latencies = []; window.opened = false;
  const es = new EventSource(url);
  es.onopen = () => { window.opened = true; };
  es.addEventListener("data", (event) => {
    const now = performance.timeOrigin + performance.now();
    const sent = Number(atob(event.data.replace(/[\\r\\n]/g, "")));
    window.latencies.push(now - sent);
  });
}"""


async def browser_delivery(
    base: str, bootstrap: str, topic: str, key: bytes, samples: int
) -> list[float]:
    """Milliseconds from a plain producer's produce() to the data event in Chromium."""
    from playwright.async_api import async_playwright  # only this figure needs it

    from devstack.browser import CHROMIUM_ARGS, chromium_path

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=chromium_path(), args=CHROMIUM_ARGS
        )
        page = await browser.new_page()
        await page.goto(f"{base}/healthz")  # the adapter's origin: no CORS involved
        url = f"{base}/{topic}/{key.decode()}?offset=now&live=sse"
        await page.evaluate(BROWSER_TAIL, url)
        await page.wait_for_function("window.opened", timeout=30_000)
        for n in range(samples):
            producer.produce(topic, f"{time.time() * 1000:.3f}".encode(), key)
            producer.flush(10)
            await page.wait_for_function(f"window.latencies.length > {n}", timeout=30_000)
        latencies: list[float] = await page.evaluate("window.latencies")
        await browser.close()
    return latencies


def _partition_of(bootstrap: str, topic: str, key: bytes) -> int:
    producer = Producer({"bootstrap.servers": bootstrap})
    found: list[int] = []
    producer.produce(
        topic, b"probe", key, on_delivery=lambda _e, m: found.append(m.partition() or 0)
    )
    producer.flush(10)
    return found[0]


def _plain_delivery(
    bootstrap: str, topic: str, key: bytes, partition: int, samples: int
) -> list[float]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"b-{uuid.uuid4().hex}",
            "fetch.wait.max.ms": 10,
            "isolation.level": "read_committed",
        }
    )
    _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), 10)
    consumer.assign([TopicPartition(topic, partition, high)])
    consumer.poll(0.5)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    times = []
    for _ in range(samples):
        sent = time.perf_counter()
        producer.produce(topic, b"ping", key, partition=partition)
        producer.flush(10)
        while True:
            message = consumer.poll(10)
            if message is not None and message.error() is None and message.key() == key:
                times.append(time.perf_counter() - sent)
                break
    consumer.close()
    return times


async def _ready(session: aiohttp.ClientSession, base: str) -> None:
    for _ in range(600):
        async with session.get(f"{base}/readyz") as response:
            if response.status == 200:
                return
        await asyncio.sleep(0.2)
    raise RuntimeError("the adapter never became ready")


async def _serve(settings: Settings, port: int) -> web.AppRunner:
    runner = web.AppRunner(create_app(settings), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner


def index_memory(keys: int, track_changes: bool = False) -> tuple[float, float]:
    """Bytes per key of a `KeyIndex` of `keys` keys of one record (tracking the keys changed
    since a save: a file is kept), and of its SQLite file once saved."""
    tracemalloc.start()
    index = KeyIndex(4096, track_changes)
    for n in range(keys):
        index.add(f"key-{n:07d}", position(n % PARTITIONS, n), None)
    list(index.ids("", None))
    used, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    folder = Path(tempfile.mkdtemp(prefix="bench-index-file-"))
    store = KeyIndexStore(folder / "index.sqlite", "bench")
    store.load(KeyIndex(4096))
    store.discard()
    store.save(snapshot(index, dict.fromkeys(range(PARTITIONS), keys)))
    store.close()
    file_bytes = (folder / "index.sqlite").stat().st_size
    shutil.rmtree(folder, ignore_errors=True)
    return used / keys, file_bytes / keys


async def run(args: argparse.Namespace) -> dict[str, Any]:
    topic = args.topic or f"bench-mount-{uuid.uuid4().hex[:8]}"
    if not args.topic:
        await asyncio.to_thread(fill, args.bootstrap_servers, topic, args)
    port = free_port()
    settings = replace(
        Settings(),
        bootstrap_servers=args.bootstrap_servers,
        listen=f"127.0.0.1:{port}",
        topic_prefix=f"bench{uuid.uuid4().hex[:6]}.",
        mount_index_dir=tempfile.mkdtemp(prefix="bench-mount-index-"),
        mount_topics=topic,  # the one topic this run mounts over HTTP
    )
    runner = await _serve(settings, port)
    base = f"http://127.0.0.1:{port}"
    result: dict[str, Any] = {
        "records": args.records,
        "keys": args.keys,
        "value_bytes": args.value_bytes,
    }
    try:
        async with aiohttp.ClientSession() as session:
            await _ready(session, base)
            started = time.perf_counter()
            mount = {"mount": {"topic": topic}}
            async with session.put(f"{base}/{topic}", json=mount) as response:
                assert response.status == 201, await response.text()
            while True:
                async with session.get(f"{base}/{topic}") as response:
                    if (await response.json())["index"]["caught_up"]:
                        break
                await asyncio.sleep(0.1)
            result["index_build_s"] = round(time.perf_counter() - started, 2)
            keys = [f"key-{random.Random(n).randrange(args.keys):07d}" for n in range(args.reads)]
            ours, theirs = [], []
            for key in keys:
                seconds, size = await catch_up(session, f"{base}/{topic}/{key}")
                ref_s, ref_size = await asyncio.to_thread(
                    scan_for_key, args.bootstrap_servers, topic, key.encode()
                )
                assert size == ref_size, (key, size, ref_size)
                ours.append(seconds)
                theirs.append(ref_s)
            result["catchup_p50_ms"] = round(statistics.median(ours) * 1000, 2)
            result["scan_reference_p50_ms"] = round(statistics.median(theirs) * 1000, 2)
            result["catchup_ratio"] = round(statistics.median(ours) / statistics.median(theirs), 4)
            sse, plain = await sse_delivery(
                session, base, args.bootstrap_servers, topic, keys[0].encode(), args.sse_samples
            )
            result["sse_p50_ms"] = round(statistics.median(sse) * 1000, 2)
            result["plain_consumer_p50_ms"] = round(statistics.median(plain) * 1000, 2)
            result["sse_ratio"] = round(statistics.median(sse) / statistics.median(plain), 2)
            if args.browser:
                in_browser = await browser_delivery(
                    base, args.bootstrap_servers, topic, keys[0].encode(), args.sse_samples
                )
                result["browser_sse_p50_ms"] = round(statistics.median(in_browser), 2)
                result["browser_sse_ratio"] = round(
                    statistics.median(in_browser) / (statistics.median(plain) * 1000), 2
                )
        await runner.cleanup()
        runner = await _serve(settings, port)  # a restart: the index resumes from its file
        async with aiohttp.ClientSession() as session:
            started = time.perf_counter()
            await _ready(session, base)
            while True:
                async with session.get(f"{base}/{topic}") as response:
                    index = (await response.json()).get("index", {})
                if index.get("caught_up"):
                    break
                await asyncio.sleep(0.1)
            result["index_resume_s"] = round(time.perf_counter() - started, 2)
            result["index_resumed"], result["records_scanned_after_restart"] = (
                index["resumed"],
                index["scanned"],
            )
    finally:
        await runner.cleanup()
        shutil.rmtree(settings.mount_index_dir, ignore_errors=True)
    per_key, _ = index_memory(args.memory_keys)
    result["index_bytes_per_key"] = round(per_key)
    result["index_mib_per_million_keys"] = round(per_key * 1_000_000 / 2**20)
    tracked, in_file = index_memory(args.memory_keys, track_changes=True)
    result["index_kept_mib_per_million_keys"] = round(tracked * 1_000_000 / 2**20)
    result["index_file_mib_per_million_keys"] = round(in_file * 1_000_000 / 2**20)
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--bootstrap-servers", default="127.0.0.1:9092")
    add("--records", type=int, default=2_000_000, help="records in the topic (2M x 512 B ≈ 1 GiB)")
    add("--keys", type=int, default=100_000)
    add("--topic", help="an existing topic filled by an earlier run (same --records, --keys)")
    add("--value-bytes", type=int, default=512)
    add("--reads", type=int, default=10, help="keys read (catch-up) and their references")
    add("--sse-samples", type=int, default=20)
    add("--browser", action=argparse.BooleanOptionalAction, default=True, help="SSE in Chromium")
    add("--memory-keys", type=int, default=200_000)
    print(json.dumps(asyncio.run(run(parser.parse_args(argv))), indent=2))


if __name__ == "__main__":
    main()
