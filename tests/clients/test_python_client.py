"""The official Python client's own integration tests, unchanged, against a real adapter.

`durable-streams` publishes them in its source distribution (`devstack/clients.py` fetches
it); their `test_server` fixture is given here as the adapter's `/v1/stream` surface instead of
the client monorepo's Node server. They run in a pytest of their own, so the project's strict
settings (warnings as errors, strict markers) judge our code, not theirs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from devstack.clients import python_tests
from tests.adapter_process import running_adapter

pytestmark = pytest.mark.integration

CONFTEST = '''"""The adapter under test is the suite's server (its own conftest starts Node's)."""
import os

import pytest


class AdapterServer:
    url = os.environ["DURABLE_STREAMS_TEST_URL"]


@pytest.fixture(scope="module")
def test_server():
    return AdapterServer()


@pytest.fixture
def anyio_backend():
    return "asyncio"
'''
INI = "[pytest]\nmarkers =\n    integration: talks to the server under test\n"


@pytest.mark.timeout(600)
def test_the_python_clients_integration_suite_passes(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    shutil.copyfile(python_tests() / "test_integration.py", suite / "test_integration.py")
    (suite / "conftest.py").write_text(CONFTEST)
    (suite / "pytest.ini").write_text(INI)
    env = {
        "DURABLE_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "DURABLE_KAFKA_TOPIC_PREFIX": f"cli{unique}.",
        "DURABLE_KAFKA_COLD_DIR": str(tmp_path / "cold"),
        "DURABLE_KAFKA_LONG_POLL_TIMEOUT_MS": "500",
    }
    with running_adapter(env, tmp_path / "adapter.log") as base_url:
        result = _run(suite, f"{base_url}/v1/stream")
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else "(no output)"
    print(f"\nthe Python client's integration tests: {summary}")
    assert result.returncode == 0, f"{result.stdout[-20000:]}\n{result.stderr[-5000:]}"
    # Every test ran and passed: none skipped, deselected or failed.
    assert re.fullmatch(r"\d+ passed(, \d+ warnings?)? in .*", summary), summary


def _run(suite: Path, url: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "pytest", str(suite), "-c", str(suite / "pytest.ini")]
    options = ["--rootdir", str(suite), "-p", "no:cacheprovider", "-p", "no:randomly", "-q"]
    return subprocess.run(
        [*argv, *options],
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
        env={**os.environ, "DURABLE_STREAMS_TEST_URL": url},
    )
