"""The benchmark harness's load generator: it builds, drives a real server, and counts truly."""

from __future__ import annotations

import asyncio
import json
import os
from collections import Counter
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from adapter.app import create_app
from bench import loadgen_run, rawkafka, suite_bootstrap, targets, tier_catchup
from bench.suite_measure import cpu_per_op
from devstack.process import free_port
from tests.conftest import SettingsFactory


@pytest.fixture(scope="module")
def loadgen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return loadgen_run.build(tmp_path_factory.mktemp("loadgen"))


def stream_app(seen: Counter[str]) -> web.Application:
    """A tiny stand-in for a Durable Streams server: PUT creates, POST appends."""

    async def create(request: web.Request) -> web.Response:
        seen["PUT"] += 1
        return web.Response(status=201)

    async def append(request: web.Request) -> web.Response:
        body = await request.read()
        seen["POST"] += 1
        seen["bytes"] += len(body)
        seen["producer"] += "Producer-Seq" in request.headers
        return web.Response(status=204, headers={"Stream-Next-Offset": str(seen["POST"])})

    app = web.Application()
    app.router.add_put("/v1/stream/{name}", create)
    app.router.add_post("/v1/stream/{name}", append)
    return app


async def test_generator_counts_real_appends(loadgen: Path) -> None:
    seen: Counter[str] = Counter()
    server = TestServer(stream_app(seen), host="127.0.0.1")
    await server.start_server()
    cpu_before = targets.cpu_seconds(os.getpid())
    try:
        base = str(server.make_url("")).rstrip("/")
        command = [str(loadgen), "-mode", "append", "-base", base, "-streams", "4", "-create"]
        command += ["-size", "100", "-warmup", "0.2", "-duration", "1", "-producer"]
        command += ["-server-pids", str(os.getpid())]  # the server runs in this process
        process = await asyncio.create_subprocess_exec(
            *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=30)
    finally:
        await server.close()
    cpu_spent = targets.cpu_seconds(os.getpid()) - cpu_before
    assert process.returncode == 0, stderr.decode()
    report = json.loads(stdout)
    # The server's CPU while measured: some (it answered every append), at most all it spent.
    assert 0 < report["server_cpu_s"] <= cpu_spent + 0.01
    assert cpu_per_op(report) == report["server_cpu_s"] / report["ok"] * 1e6
    assert report["errors"] == 0
    assert report["ok"] > 0
    assert seen["PUT"] == 4
    assert seen["POST"] >= report["ok"]  # the server also saw the warm-up's appends
    assert seen["bytes"] == 100 * seen["POST"]
    assert seen["producer"] == seen["POST"]
    assert report["bytes"] == 100 * report["ok"]


async def test_without_server_pids_no_server_cpu_is_reported(loadgen: Path) -> None:
    seen: Counter[str] = Counter()
    server = TestServer(stream_app(seen), host="127.0.0.1")
    await server.start_server()
    try:
        base = str(server.make_url("")).rstrip("/")
        command = [str(loadgen), "-mode", "append", "-base", base, "-streams", "1", "-create"]
        command += ["-warmup", "0", "-duration", "0.3"]
        process = await asyncio.create_subprocess_exec(
            *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=30)
    finally:
        await server.close()
    assert process.returncode == 0, stderr.decode()
    report = json.loads(stdout)
    assert report["ok"] > 0
    assert "server_cpu_s" not in report
    assert cpu_per_op(report) is None


async def test_bootstrap_bench_reads_back_exactly_what_it_wrote(
    make_settings: SettingsFactory, unique: str
) -> None:
    server = TestServer(create_app(make_settings()), host="127.0.0.1")
    await server.start_server()
    try:
        base = str(server.make_url("")).rstrip("/")
        await _until_ready(base)
        sizes = suite_bootstrap.Sizes(
            snapshot_bytes=3 * 1024 * 1024 + 7, messages=120, message_bytes=900
        )
        await suite_bootstrap.populate(base, sizes, unique)
        result = await suite_bootstrap.compare(base, sizes, reps=2, tag=unique)
    finally:
        await server.close()
    assert [len(result["reps"][way]) for way in suite_bootstrap.WAYS] == [2, 2]
    for way in suite_bootstrap.WAYS:
        assert result["median"][way]["mb_per_s"] > 0
        assert 0 < result["median"][way]["ttfb_ms"] <= result["median"][way]["total_ms"]
    assert result["ratios"]["mb_per_s"] > 0
    assert "bootstrap / catch-up" in suite_bootstrap.table(result)


async def test_bootstrap_bench_refuses_an_answer_missing_a_part(unique: str) -> None:
    """Against a server whose bootstrap drops a message, the bench fails instead of timing."""
    sizes = suite_bootstrap.Sizes(snapshot_bytes=10, messages=3, message_bytes=4)
    boundary = "b"
    parts = [b"s" * 10, b"mmmm", b"mmmm"]  # one message short
    body = b"".join(f"\r\n--{boundary}\r\n\r\n".encode() + p for p in parts)[2:]
    body += f"\r\n--{boundary}--\r\n".encode()

    async def boot(request: web.Request) -> web.Response:
        content_type = f"multipart/mixed; boundary={boundary}"
        return web.Response(body=body, headers={"Content-Type": content_type})

    app = web.Application()
    app.router.add_get("/s/bootstrap", boot)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as session:
            with pytest.raises(suite_bootstrap.BenchError, match="2 parts after the first"):
                await suite_bootstrap.bootstrap(session, str(server.make_url("/s")), sizes)
    finally:
        await server.close()


async def _until_ready(base: str) -> None:
    async with aiohttp.ClientSession() as session:
        for _ in range(300):
            async with session.get(f"{base}/readyz") as reply:
                if reply.status == 200:
                    return
            await asyncio.sleep(0.05)
    raise AssertionError("the adapter never became ready")


async def test_tier_bench_reads_a_stream_hot_then_cold_and_times_appends(
    make_settings: SettingsFactory,
) -> None:
    """bench.tier_catchup on an in-process adapter: the cold read returns as many bytes as the
    hot one (else BenchError) and came from the store; appends were timed in both phases."""
    settings = make_settings(
        listen=f"127.0.0.1:{free_port()}",
        partitions=1,
        hot_cache_bytes=0,
        tier_after_bytes=0,
        tier_after_ms=0,
        tier_interval_ms=3_600_000,
    )
    result = await tier_catchup.run_app(settings, 2 * tier_catchup.MIB, probes=5)
    assert result["bytes"] == 2 * tier_catchup.MIB
    assert result["store_gets"] > 0  # the cold read fetched blocks
    assert result["appends"]["idle"]["count"] == 5
    assert result["appends"]["tiering"]["count"] >= 1
    assert set(result["mb_per_s"]) == {"hot", "cold", "cold_cached"}
    assert result["ratios"]["append_p99_tiering_vs_idle"] > 0
    assert "tiering / idle" in tier_catchup.table(result)


async def test_the_python_floors_answer_appends_and_the_kafka_one_commits_each(
    loadgen: Path, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    """bench/floor_server.py as the suite starts it: every append the generator counted as
    answered is in memory (python-floor) or committed in Kafka (python-kafka-floor, read back
    by a read_committed consumer), so the floors' figures are of work really done."""
    options = targets.TargetOptions(kafka_bootstrap, f"{unique}.", 3_600_000, 15_000)
    for name in targets.FLOORS:
        server = targets.start(name, tmp_path, options)
        try:
            report = loadgen_run.run(
                loadgen,
                {"mode": "append", "base": server.url, "streams": 3, "create": True}
                | {"size": 100, "warmup": 0.2, "duration": 1, "server-pids": server.pid},
                timeout_s=60,
            ).report
        finally:
            targets.stop(server)
        assert report["errors"] == 0, report
        assert report["ok"] > 0, report
        assert report["server_cpu_s"] > 0, report  # its process is the one measured
        if name == targets.PYTHON_KAFKA_FLOOR:
            committed = await asyncio.to_thread(
                _committed_records, kafka_bootstrap, targets.floor_topic(options)
            )
            # The generator counts only the measured window.
            assert committed.total() >= report["ok"]


def _committed_records(bootstrap: str, topic: str, partitions: int = 1) -> Counter[int]:
    """Records of `topic` a read_committed consumer sees in each partition, read to the end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"committed-check-{topic}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    by_partition: Counter[int] = Counter()
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        ended: set[int] = set()
        while len(ended) < partitions:
            message = consumer.poll(10)
            assert message is not None, f"no end of {topic} within 10 s"
            error = message.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                ended.add(message.partition() or 0)
            else:
                by_partition[message.partition() or 0] += 1
        return by_partition
    finally:
        consumer.close()


def test_the_broker_warm_up_commits_transactions_from_every_producer(kafka_bootstrap: str) -> None:
    """What `make bench` runs on its fresh broker before measuring: real transactions, each of
    six records, committed (a read_committed consumer reads them all), from every producer."""
    topic, committed = rawkafka.warm_broker(kafka_bootstrap, seconds=1.0, producers=3)
    assert committed > 0
    by_partition = _committed_records(kafka_bootstrap, topic, partitions=3)
    assert sum(by_partition.values()) == committed * 6
    assert sorted(by_partition) == [0, 1, 2]  # every producer committed
