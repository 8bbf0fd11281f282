"""The protocol's official conformance suite against a real adapter on the test broker."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.adapter_process import running_adapter

CONFORMANCE = Path(__file__).resolve().parents[2] / "conformance"
LONG_POLL_TIMEOUT_MS = "500"  # as the reference server's own conformance run


@pytest.mark.timeout(900)
@pytest.mark.parametrize("workers", [1, 2], ids=["one_worker", "two_workers"])
def test_conformance_suite(kafka_bootstrap: str, unique: str, tmp_path: Path, workers: int) -> None:
    """Against `serve` as one process, and as `serve --workers 2` (a client's requests land on
    either worker: forwarded writes, reads synchronised with the slot's owner)."""
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
    with running_adapter(env, tmp_path / "adapter.log", workers=workers) as base_url:
        result = subprocess.run(
            ["node", str(CONFORMANCE / "run.mjs"), base_url],
            capture_output=True,
            text=True,
            timeout=840,
            check=False,
        )
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else "(no output)"
    print(f"\nconformance ({workers} worker{'s' if workers > 1 else ''}): {summary}")
    assert result.returncode == 0, f"{result.stdout[-20000:]}\n{result.stderr[-5000:]}"
