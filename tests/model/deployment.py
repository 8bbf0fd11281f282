"""The deployment the protocol model drives: two `durable-kafka serve` processes on one topic
prefix (the cold tier on MinIO, tiering and age retention every 200 ms), each restartable
gently or with `kill -9`, and a small synchronous HTTP client that sends a request again
while the answer is the documented 503 (a slot changing owner: nothing was done)."""

from __future__ import annotations

import http.client
import json
import os
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devstack.process import free_port
from tests.adapter_process import OPS_ANY_PORT, SCRIPT, http_status
from tests.cluster import SLOTS, cluster_env
from tests.services import S3Server

PASS_INTERVAL_MS = 200  # tiering and age retention: a pass every 200 ms on each instance
SETTLE_S = 90.0  # a bound for slots to settle after a restart on a loaded machine
RETRY_503_S = 60.0  # how long a request is sent again while it answers 503


def model_env(bootstrap: str, prefix: str, tmp_path: Path, s3: S3Server) -> dict[str, str]:
    """Both instances' settings: one partition per bucket (every stream of a bucket shares it,
    so tiering and retention cuts cross streams), a tiny hot window, passes every 200 ms."""
    return cluster_env(bootstrap, prefix, tmp_path) | {
        "DURABLE_KAFKA_PARTITIONS": "1",
        "DURABLE_KAFKA_COLD_BACKEND": "s3",
        "DURABLE_KAFKA_S3_BUCKET": f"model-{prefix.strip('.').lower()}",
        "DURABLE_KAFKA_S3_ENDPOINT_URL": s3.endpoint_url,
        "DURABLE_KAFKA_S3_ACCESS_KEY_ID": s3.access_key_id,
        "DURABLE_KAFKA_S3_SECRET_ACCESS_KEY": s3.secret_access_key,
        "DURABLE_KAFKA_TIER_AFTER_BYTES": "256",
        "DURABLE_KAFKA_TIER_AFTER_MS": "0",
        "DURABLE_KAFKA_TIER_INTERVAL_MS": str(PASS_INTERVAL_MS),
        "DURABLE_KAFKA_AGE_RETENTION_INTERVAL_MS": str(PASS_INTERVAL_MS),
        "DURABLE_KAFKA_HOT_CACHE_BYTES": "0",  # reads go to Kafka or the chunks
        "DURABLE_KAFKA_READ_CHUNK_BYTES": "1024",  # long reads come in several answers
        "DURABLE_KAFKA_LONG_POLL_TIMEOUT_MS": "500",
        "DURABLE_KAFKA_SNAPSHOT_GC_GRACE_MS": "30000",  # its least with a 3 s Kafka timeout
        "DURABLE_KAFKA_CONSOLE_MAX_LAST": "3",  # the console's seek?last=N past it: 400
    }


@dataclass(frozen=True)
class Reply:
    status: int
    headers: Mapping[str, str]  # names lower-cased
    body: bytes

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    def code(self) -> str | None:
        """The error code of a `{"error": {"code": ...}}` body, if it is one."""
        try:
            return str(json.loads(self.body)["error"]["code"])
        except (ValueError, KeyError, TypeError):
            return None


class ServerError(AssertionError):
    """A 5xx other than the documented 503, or a 503 that never went away."""


class Instance:
    """One `durable-kafka serve` process on a fixed port, so a restart keeps its URL."""

    def __init__(
        self,
        name: str,
        env: Mapping[str, str],
        log_dir: Path,
        credentials: Callable[[], dict[str, str]] = dict,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.name = name
        self.tls = tls  # HTTPS, the server's certificate checked with this context
        self.credentials = credentials  # the headers that authenticate each request
        self.env = dict(env) | {"DURABLE_KAFKA_CATALOG_DIR": str(log_dir / f"catalog-{name}")}
        self.log = log_dir / f"{name}.log"
        self.port = free_port()
        self.base = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.conn: http.client.HTTPConnection | None = None
        self.sent = 0  # requests sent through this instance

    def start(self) -> None:
        argv = [SCRIPT, "serve", "--listen", f"127.0.0.1:{self.port}", *OPS_ANY_PORT]
        with self.log.open("ab") as sink:
            self.proc = subprocess.Popen(argv, env=os.environ | self.env, stderr=sink)
        deadline = time.monotonic() + SETTLE_S
        while http_status(f"{self.base}/readyz", self.tls) != 200:
            self.assert_alive()
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name} never became ready:\n{self.log.read_text()}")
            time.sleep(0.1)

    def stop(self, hard: bool) -> None:
        """SIGKILL (`hard`) or SIGTERM, and wait for the process to be gone."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL if hard else signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._drop_connection()

    def pause(self) -> None:
        """SIGSTOP: the process holds its connections and answers nothing."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def assert_alive(self) -> None:
        """No process exits on its own."""
        assert self.proc is not None
        code = self.proc.poll()
        if code is not None:
            raise AssertionError(f"{self.name} exited with {code}:\n{self.log.read_text()}")

    def request(
        self, method: str, path: str, headers: Mapping[str, str] | None = None, body: bytes = b""
    ) -> Reply:
        """One request, sent again while it answers 503 (after its `Retry-After`, at most 1 s)
        or its connection drops (an instance being restarted); any other 5xx fails the test."""
        self.sent += 1
        deadline = time.monotonic() + RETRY_503_S
        while True:
            reply = self._once(method, path, headers or {}, body)
            if reply is not None and reply.status != 503:
                if reply.status >= 500:
                    raise ServerError(f"{method} {path} via {self.name}: {_shown(reply)}")
                return reply
            if time.monotonic() > deadline:
                raise ServerError(f"{method} {path} via {self.name}: 503 for {RETRY_503_S} s")
            wait = 0.5 if reply is None else float(reply.header("Retry-After") or "1")
            time.sleep(min(wait, 1.0))

    def _once(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes
    ) -> Reply | None:
        if self.conn is None:
            self.conn = (
                http.client.HTTPSConnection("127.0.0.1", self.port, timeout=30, context=self.tls)
                if self.tls is not None
                else http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            )
        try:
            sent = self.credentials() | dict(headers)
            self.conn.request(method, path, body=body or None, headers=sent)
            response = self.conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException):
            self._drop_connection()
            return None
        found = {name.lower(): value for name, value in response.getheaders()}
        if found.get("connection", "").lower() == "close":
            self._drop_connection()
        return Reply(response.status, found, data)

    def _drop_connection(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def _shown(reply: Reply) -> str:
    return f"{reply.status} {reply.body[:300]!r}"


def settle(instances: list[Instance]) -> None:
    """Until every instance is ready, owns slots, and together they own every slot with each
    knowing every slot's owner (no write answers 503 then)."""
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline:
        found = [ownership(instance) for instance in instances]
        owned: list[int] = []
        for one in found:
            if one is None or one.get("unroutable_slots") != []:
                break
            owned += [int(slot) for slot in one.get("owned_slots") or {}]
        else:
            if sorted(owned) == list(range(SLOTS)):
                return
        for instance in instances:
            instance.assert_alive()
        time.sleep(0.2)
    raise AssertionError("the instances' slots never settled")


def ownership(instance: Instance) -> dict[str, Any] | None:
    try:
        url = f"{instance.base}/readyz"
        with urllib.request.urlopen(url, timeout=2, context=instance.tls) as response:
            checks: dict[str, Any] = json.load(response)["checks"]
    except (OSError, ValueError, KeyError, urllib.error.URLError):
        return None
    ownership = checks.get("ownership")
    return ownership if isinstance(ownership, dict) else None
