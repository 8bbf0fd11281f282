"""The `durable-kafka` console script as a user runs it: a real process on a real broker."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from adapter.auth.static_tokens import StaticTokens, digest
from devstack.process import free_port

SCRIPT = str(Path(sys.executable).with_name("durable-kafka"))


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
    argv = [SCRIPT, "serve", "--listen", f"127.0.0.1:{port}"]
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
