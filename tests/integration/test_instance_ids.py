"""Two processes given one instance id: a clear error and exit 1, never a tug of war."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import aiohttp
import pytest

from devstack.process import free_port
from tests.adapter_process import OPS_ANY_PORT, SCRIPT, WORKERS, running_adapter
from tests.cluster import cluster_env, owned

pytestmark = [pytest.mark.integration, pytest.mark.faults]


def _serve(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    argv = [SCRIPT, "serve", "--listen", f"127.0.0.1:{free_port()}", *OPS_ANY_PORT, *WORKERS]
    with log.open("ab") as sink:
        return subprocess.Popen(argv, env=os.environ | env, stderr=sink)


@pytest.mark.timeout(120)
async def test_an_instance_id_in_use_under_another_url_is_refused_at_start(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    env = cluster_env(kafka_bootstrap, f"ids{unique}.", tmp_path)
    env["DURABLE_KAFKA_INSTANCE_ID"] = "adapter-1"
    with running_adapter(env, tmp_path / "a.log") as a:
        second = _serve(env, tmp_path / "b.log")
        assert second.wait(60) == 1
        async with aiohttp.ClientSession() as session:
            assert await owned(session, a) == set(range(8))  # the first serves on, untouched
    assert "instance id 'adapter-1' is already a member" in (tmp_path / "b.log").read_text()


@pytest.mark.timeout(120)
async def test_a_member_fenced_by_a_newcomer_with_its_id_says_so_and_rejoins(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    env = cluster_env(kafka_bootstrap, f"ids{unique}.", tmp_path)
    env["DURABLE_KAFKA_ADVERTISE_URL"] = "http://adapter-1.internal:4437"  # one URL for both
    with running_adapter(env, tmp_path / "a.log"):
        second = _serve(env, tmp_path / "b.log")
        try:
            for _ in range(600):  # until the newcomer fences the first, which rejoins
                if "rejoining" in (tmp_path / "a.log").read_text():
                    break
                await asyncio.sleep(0.1)
        finally:
            second.terminate()
            second.wait(30)
    first_log = (tmp_path / "a.log").read_text()
    # A fencing is what a coordinator restart causes too, so it is never fatal (it was: every
    # broker restart could stop an instance); the log says what happened.
    assert "the owners' consumer was fenced" in first_log
    assert "rejoining" in first_log
