"""The official TypeScript client, unchanged, against a real adapter, one test per check.

`@durable-streams/client` publishes no tests, so `ts_client.mjs` drives its public API (create,
append, catch-up, long-poll, SSE, the idempotent producer, close, delete, a missing stream) and
prints one JSON line per check. One run of it against one adapter serves every test here.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.adapter_process import running_adapter

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "ts_client.mjs"
CONFORMANCE = HERE.parents[1] / "conformance"
CHECKS = (
    "create a text stream",
    "create a JSON stream",
    "append text and read it back from the start",
    "append JSON and read the messages back from the start",
    "read from an offset",
    "long-poll delivers a message appended after it subscribed",
    "SSE delivers a message appended after it subscribed",
    "the idempotent producer's retried append is stored once",
    "close a stream",
    "delete a stream",
    "a missing stream surfaces as the client's 404 errors",
)
Results = dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def ts_client_results(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Results]:
    """Every check's line, from one run of the script against an adapter on the test broker."""
    assert shutil.which("node"), "Node.js is needed for the TypeScript client"
    installed = CONFORMANCE / "node_modules" / "@durable-streams" / "client"
    assert installed.is_dir(), "run `make deps` (npm ci in conformance/)"
    home = tmp_path_factory.mktemp("ts-client")
    env = {
        "DURABLE_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "DURABLE_KAFKA_TOPIC_PREFIX": f"ts{uuid.uuid4().hex[:10]}.",
        "DURABLE_KAFKA_COLD_DIR": str(home / "cold"),
        "DURABLE_KAFKA_LONG_POLL_TIMEOUT_MS": "500",
    }
    with running_adapter(env, home / "adapter.log") as base_url:
        yield run_script(f"{base_url}/v1/stream")


def run_script(streams_url: str) -> Results:
    result = subprocess.run(
        ["node", str(SCRIPT), streams_url],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    results = {line["check"]: line for line in lines}
    # Every line was a check we know and the exit status agrees with them.
    assert set(results) <= set(CHECKS), f"unknown checks: {set(results) - set(CHECKS)}"
    all_ok = bool(lines) and all(line["ok"] for line in lines)
    assert (result.returncode == 0) == all_ok, f"exit {result.returncode}: {result.stderr[-5000:]}"
    return results


@pytest.mark.timeout(600)
@pytest.mark.parametrize("check", CHECKS)
def test_the_typescript_client(ts_client_results: Results, check: str) -> None:
    assert check in ts_client_results, f"the script never reported {check!r}"
    line = ts_client_results[check]
    assert line["ok"] is True, line["detail"]
