"""`serve --workers 2` with one worker stopped (SIGSTOP, as a wedged event loop looks from
outside): the ops listeners' `/healthz` and `/readyz`, which the chart's probes ask, fail for
the whole instance (the stopped worker's own listener does not answer at all; its sibling's
says which worker is silent), and pass again once it resumes."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.adapter_process import running_adapter, worker_pids
from tests.cluster import OPS_URL, cluster_env

NO_ANSWER = (0, None)
UNTIL_S = 30.0  # the loaded machine's bound for a change to show; the probes' own is 1 s


def _answer(url: str) -> tuple[int, str | None]:
    """(status, error code) of a GET as a probe sends it; (0, None) when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            return int(response.status), None
    except urllib.error.HTTPError as error:
        return int(error.code), json.loads(error.read())["error"]["code"]
    except (urllib.error.URLError, OSError):
        return NO_ANSWER


async def _until(ops: list[str], path: str, wanted: set[tuple[int, str | None]]) -> None:
    """Until the ops listeners' answers to `path` are `wanted` (as a set)."""
    deadline = time.monotonic() + UNTIL_S
    while True:
        answers = await asyncio.gather(*(asyncio.to_thread(_answer, f"{o}{path}") for o in ops))
        if set(answers) == wanted:
            return
        assert time.monotonic() < deadline, (path, answers)
        await asyncio.sleep(0.2)


@pytest.mark.timeout(180)
async def test_a_stopped_worker_fails_the_instances_probes_until_it_resumes(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    log = tmp_path / "adapter.log"
    with running_adapter(
        cluster_env(kafka_bootstrap, f"ph{unique}.", tmp_path), log, workers=2
    ) as base:
        ops = OPS_URL.findall(log.read_text())
        assert len(ops) == 2, log.read_text()
        for path in ("/healthz", "/readyz"):
            await _until(ops, path, {(200, None)})
        stopped = min(worker_pids(int(base.rpartition(":")[2])))
        os.kill(stopped, signal.SIGSTOP)
        try:
            for path in ("/healthz", "/readyz"):
                await _until(ops, path, {NO_ANSWER, (503, "worker_unresponsive")})
        finally:
            os.kill(stopped, signal.SIGCONT)
        for path in ("/healthz", "/readyz"):
            await _until(ops, path, {(200, None)})
