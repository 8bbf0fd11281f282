"""The protocol's official conformance suite against a real adapter on the test broker."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import urllib.request
from collections.abc import Mapping
from pathlib import Path

import pytest

from devstack.secure_kafka import APP, SecureKafka, properties_file
from tests.adapter_process import SCRIPT, running_adapter
from topology.acls import instance_grants

CONFORMANCE = Path(__file__).resolve().parents[2] / "conformance"
LONG_POLL_TIMEOUT_MS = "500"  # as the reference server's own conformance run


@pytest.mark.timeout(900)
def test_conformance_suite_one_worker(kafka_bootstrap: str, unique: str, tmp_path: Path) -> None:
    """Against `serve` as one process, on a plain broker."""
    assert shutil.which("node"), "Node.js is needed for the conformance suite"
    assert (CONFORMANCE / "node_modules").is_dir(), "run `make deps` (npm ci in conformance/)"
    env = {
        "DURABLE_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "DURABLE_KAFKA_TOPIC_PREFIX": f"conf{unique}.",
        "DURABLE_KAFKA_COLD_DIR": str(tmp_path / "cold"),
        "DURABLE_KAFKA_LONG_POLL_TIMEOUT_MS": LONG_POLL_TIMEOUT_MS,
        # The suite's preflight test asks as a page of this origin (same-origin is the default).
        "DURABLE_KAFKA_CORS_ORIGINS": "https://example.com",
    }
    with running_adapter(env, tmp_path / "adapter.log") as base_url:
        result = _suite(base_url)
    _passed("one worker", result)


def _suite(base_url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["node", str(CONFORMANCE / "run.mjs"), base_url],
        capture_output=True,
        text=True,
        timeout=840,
        check=False,
    )


def _passed(variant: str, result: subprocess.CompletedProcess[str]) -> None:
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else "(no output)"
    print(f"\nconformance ({variant}): {summary}")
    assert result.returncode == 0, f"{result.stdout[-20000:]}\n{result.stderr[-5000:]}"


@pytest.mark.timeout(900)
def test_conformance_suite_two_workers_over_sasl_ssl_leaks_no_secret(
    secured_kafka: SecureKafka, unique: str, tmp_path: Path
) -> None:
    """`serve --workers 2` (a client's requests land on either worker: forwarded writes, reads
    synchronised with the slot's owner) on a broker that allows only what the documented ACLs
    grant, its password in a client.properties file: the suite passes, and the password
    appears nowhere the server or its CLI wrote (log, `/readyz`, `/metrics`, `tier-stats`'
    output)."""
    prefix = f"conf{unique}."
    secured_kafka.grant(APP, instance_grants(prefix))
    password = secured_kafka.app_password
    client_file = properties_file(tmp_path / "client.properties", secured_kafka.sasl_properties())
    env = {
        "DURABLE_KAFKA_BOOTSTRAP_SERVERS": secured_kafka.sasl_bootstrap,
        "DURABLE_KAFKA_KAFKA_CLIENT_FILE": str(client_file),
        "DURABLE_KAFKA_TOPIC_PREFIX": prefix,
        "DURABLE_KAFKA_COLD_DIR": str(tmp_path / "cold"),
        "DURABLE_KAFKA_LONG_POLL_TIMEOUT_MS": LONG_POLL_TIMEOUT_MS,
        "DURABLE_KAFKA_CORS_ORIGINS": "https://example.com",
        "DURABLE_KAFKA_LOG_LEVEL": "debug",  # the most it could ever write
    }
    log = tmp_path / "adapter.log"
    with running_adapter(env, log, workers=2) as base_url:
        result = _suite(base_url)
        answers = [_get(f"{base_url}/readyz"), _get(f"{_ops_url(log)}/metrics")]
    _passed("two workers, SASL_SSL", result)
    stats = subprocess.run(
        [SCRIPT, "tier-stats"], env=_environ(env), capture_output=True, text=True, timeout=120
    )
    assert stats.returncode == 0, stats.stderr
    assert json.loads(answers[0])["ready"] is True
    written = [log.read_text(errors="replace"), *answers, stats.stdout, stats.stderr]
    assert all(password not in text for text in written)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return str(response.read().decode())


def _ops_url(log: Path) -> str:
    found = re.search(r"ops listener on (http://127\.0\.0\.1:\d+)", log.read_text())
    assert found, "the ops listener's address is not in the log"
    return found.group(1)


def _environ(env: Mapping[str, str]) -> dict[str, str]:
    return {**os.environ, **env}
