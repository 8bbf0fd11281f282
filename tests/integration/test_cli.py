"""The `durable-kafka` console script as a user runs it: a real process on a real broker."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from adapter.auth.static_tokens import StaticTokens, digest
from devstack.process import free_port
from tests.adapter_process import OPS_ANY_PORT, SCRIPT, WORKERS


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def _wait_ready(url: str, proc: subprocess.Popen[bytes]) -> dict[str, object]:
    for _ in range(200):
        assert proc.poll() is None, "the server exited during start-up"
        try:
            status, body = _get(url)
        except (urllib.error.URLError, OSError):
            status, body = 0, b""
        if status == 200:
            report: dict[str, object] = json.loads(body)
            return report
        time.sleep(0.1)
    raise AssertionError("never ready")


def test_help_lists_serve_and_its_flags() -> None:
    top = subprocess.run([SCRIPT, "--help"], capture_output=True, text=True, check=True)
    assert "serve" in top.stdout
    serve = subprocess.run([SCRIPT, "serve", "--help"], capture_output=True, text=True, check=True)
    for flag in ("--bootstrap-servers", "--listen", "--topic-prefix", "--cold-backend"):
        assert flag in serve.stdout


def test_bad_configuration_exits_2_with_the_reason(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('[kafka]\npartitions = "many"\n')
    result = subprocess.run(
        [SCRIPT, "serve", "--config", str(config)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 2
    assert "partitions" in result.stderr


def test_hash_token_prints_the_digest_of_the_token_read_from_stdin() -> None:
    token = "a-long-enough-client-token-0123"
    result = subprocess.run(
        [SCRIPT, "hash-token"], input=token + "\n", capture_output=True, text=True, check=True
    )
    assert result.stdout == f'sha256 = "{digest(token)}"\n'
    short = subprocess.run(
        [SCRIPT, "hash-token"], input="short\n", capture_output=True, text=True, check=False
    )
    assert short.returncode == 2


def test_hash_token_new_makes_a_token_that_the_file_accepts(tmp_path: Path) -> None:
    result = subprocess.run(
        [SCRIPT, "hash-token", "--new"], capture_output=True, text=True, check=True
    )
    comment, entry = result.stdout.splitlines()
    token = comment.rsplit(" ", 1)[1]
    path = tmp_path / "tokens.toml"
    path.write_text(f'[[token]]\nname = "bot"\n{entry}\nscopes = ["read:logs"]\n')
    assert StaticTokens.load(path).verify(token, time.time()).name == "bot"


def test_a_token_file_that_does_not_load_exits_2(tmp_path: Path) -> None:
    result = subprocess.run(
        [SCRIPT, "serve", "--auth-mode", "static", "--auth-token-file", str(tmp_path / "no")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "cannot read token file" in result.stderr


@pytest.mark.parametrize("setting", ["listen", "ops_listen"])
def test_an_address_in_use_exits_2_with_one_line_naming_the_setting(
    kafka_bootstrap: str, unique: str, tmp_path: Path, setting: str
) -> None:
    """A second instance on the same host: the port it was given is already taken, so it
    stops with exit 2 and one line naming the setting and the address, not a traceback."""
    env = os.environ | {
        "DURABLE_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "DURABLE_KAFKA_TOPIC_PREFIX": f"cli{unique}.",
        "DURABLE_KAFKA_COLD_DIR": str(tmp_path / "cold"),
    }
    with socket.create_server(("127.0.0.1", 0)) as taken:
        held = f"127.0.0.1:{taken.getsockname()[1]}"
        addresses = {"listen": f"127.0.0.1:{free_port()}", "ops_listen": "127.0.0.1:0"}
        addresses[setting] = held
        argv = [SCRIPT, "serve", "--listen", addresses["listen"]]
        argv += ["--ops-listen", addresses["ops_listen"], *WORKERS]
        result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    line = f"durable-kafka: configuration error: {setting} {held}: cannot listen there: "
    assert f"{line}Address already in use\n" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_serves_ready_and_stops_cleanly(
    kafka_bootstrap: str, unique: str, tmp_path: Path, loop: str
) -> None:
    port = free_port()
    env = os.environ | {
        "DURABLE_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "DURABLE_KAFKA_TOPIC_PREFIX": f"cli{unique}.",
        "DURABLE_KAFKA_COLD_DIR": str(tmp_path / "cold"),
        "DURABLE_KAFKA_EVENT_LOOP": loop,
    }
    argv = [SCRIPT, "serve", "--listen", f"127.0.0.1:{port}", *OPS_ANY_PORT, *WORKERS]
    log = tmp_path / "serve.log"
    with log.open("wb") as sink, subprocess.Popen(argv, env=env, stderr=sink) as proc:
        try:
            report = _wait_ready(f"http://127.0.0.1:{port}/readyz", proc)
            assert report["ready"] is True
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
        finally:
            proc.kill()
    assert f"created topic cli{unique}.internal.meta" in log.read_text()
    assert f"{loop} event loop" in log.read_text()


def _request(method: str, url: str) -> int:
    request = urllib.request.Request(url, method=method, headers={"Content-Type": "text/plain"})
    with urllib.request.urlopen(request, timeout=30) as response:
        status: int = response.status
        return status


def _waiters(metrics_url: str) -> float:
    text = _get(metrics_url)[1].decode()
    families = text_string_to_metric_families(text)
    return next(
        sample.value
        for family in families
        for sample in family.samples
        if sample.name == "durable_kafka_live_waiters"
    )


def test_sigterm_drops_readiness_and_answers_a_long_poll(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    port, ops_port = free_port(), free_port()
    env = os.environ | {
        "DURABLE_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "DURABLE_KAFKA_TOPIC_PREFIX": f"cli{unique}.",
        "DURABLE_KAFKA_COLD_DIR": str(tmp_path / "cold"),
        "DURABLE_KAFKA_LONG_POLL_TIMEOUT_MS": "8000",
    }
    argv = [SCRIPT, "serve", "--listen", f"127.0.0.1:{port}", *WORKERS]
    argv += ["--ops-listen", f"127.0.0.1:{ops_port}"]
    base, ops = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{ops_port}"
    log = tmp_path / "serve.log"
    with (
        log.open("wb") as sink,
        subprocess.Popen(argv, env=env, stderr=sink) as proc,
        ThreadPoolExecutor(1) as pool,
    ):
        try:
            assert _wait_ready(f"{ops}/readyz", proc)["ready"] is True
            assert _request("PUT", f"{base}/drained") == 201
            assert _request("PUT", f"{base}/drained/s") == 201
            poll = pool.submit(_request, "GET", f"{base}/drained/s?offset=now&live=long-poll")
            while _waiters(f"{ops}/metrics") < 1:
                time.sleep(0.05)
            proc.send_signal(signal.SIGTERM)
            status, body = _get(f"{ops}/readyz")
            while status == 200:
                status, body = _get(f"{ops}/readyz")
            assert status == 503
            assert json.loads(body)["checks"]["serving"]["ok"] is False
            assert poll.result(timeout=30) == 204  # answered at once, not cut off by the drain
            assert proc.wait(timeout=30) == 0
        finally:
            proc.kill()
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert any("draining requests for up to" in line["message"] for line in lines)
