"""The benchmark harness's load generator: it builds, drives a real server, and counts truly."""

from __future__ import annotations

import asyncio
import json
import os
from collections import Counter
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from bench import loadgen_run, targets
from bench.suite_measure import cpu_per_op


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
