"""A thousand writers at once on one `durable-kafka serve` (the real broker): every append is
answered, 204 or 503 with `Retry-After`, and none meets a reset connection or waits past the
client's timeout. The benchmarks' load generator drives it (closed loop, keep-alive, one stream
per writer, all connecting at once), for a bounded time; it counts every failure, in its
warm-up and after its window too. Every answered append has its line in the request log
(written off the event loop: `adapter/request_lines.py`), valid against the log's schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest

from bench import loadgen_run
from tests.adapter_process import running_adapter

WRITERS = 1000
SECONDS = 8
CLIENT_TIMEOUT_S = 30  # past it a request counts as unanswered ("transport")
ROOT = Path(__file__).resolve().parents[2]
REQUEST_LOG = jsonschema_rs.validator_for(
    json.loads((ROOT / "schemas" / "request_log.schema.json").read_text())
)


@pytest.fixture(scope="module")
def loadgen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return loadgen_run.build(tmp_path_factory.mktemp("loadgen"))


# Starting the adapter and creating 1,000 streams on a loaded machine takes minutes.
@pytest.mark.timeout(900)
def test_a_thousand_writers_are_all_answered(
    loadgen: Path, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    env = {
        "DURABLE_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "DURABLE_KAFKA_TOPIC_PREFIX": f"ov{unique}.",
        "DURABLE_KAFKA_COLD_DIR": str(tmp_path / "cold"),
    }
    options: dict[str, object] = {
        "mode": "append",
        "streams": WRITERS,
        "size": 256,
        "create": True,
        "warmup": 0,
        "duration": SECONDS,
        "prefix": f"w{unique}-",
        "timeout": CLIENT_TIMEOUT_S,
    }
    log = tmp_path / "adapter.log"
    with running_adapter(env, log) as url:
        outcome = loadgen_run.run(loadgen, options | {"base": url}, timeout_s=800)
    report = outcome.report
    # "503" is a 503 with Retry-After; one without it is "503-no-retry-after".
    assert set(report["statuses"]) <= {"204", "503"}, (report["statuses"], report["error_samples"])
    assert report["ok"] > 0
    lines = _logged(log, "durable_kafka.requests")
    for line in lines:
        REQUEST_LOG.validate(line)
    dropped = sum(line["dropped"] for line in _logged(log, "adapter.request_lines"))
    appends = sum(line["method"] == "POST" for line in lines)
    # The generator counts successes in its window only, failures always.
    assert appends + dropped >= report["ok"] + report["errors"]


def _logged(log: Path, logger: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    return [line for line in lines if line["logger"] == logger]
