"""The benchmark suite's targets: durable-kafka (one or several instances) and the references."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from bench import targets


@dataclass
class Deployment:
    """One target as the load generator sees it: its servers and their base URLs."""

    name: str
    servers: list[targets.Server] = field(default_factory=list)

    @property
    def bases(self) -> str:
        return ",".join(server.url for server in self.servers)

    @property
    def pids(self) -> list[int]:
        return [server.pid for server in self.servers]

    def alive(self) -> bool:
        return all(server.process.poll() is None for server in self.servers)

    def stop(self) -> None:
        for server in self.servers:
            targets.stop(server)


def row_name(target: str, instances: int) -> str:
    return f"{target}x{instances}" if target == targets.DURABLE_KAFKA and instances > 1 else target


def start(target: str, log_dir: Path, options: targets.TargetOptions, instances: int) -> Deployment:
    if target != targets.DURABLE_KAFKA:
        return Deployment(target, [targets.start(target, log_dir, options)])
    deployment = Deployment(row_name(target, instances))
    try:
        for index in range(instances):
            deployment.servers.append(_start_instance(index, log_dir, options))
        if instances > 1:
            _check_writes(deployment)
    except targets.TargetError:
        deployment.stop()
        raise
    return deployment


def _check_writes(deployment: Deployment) -> None:
    """Every instance must accept a write: one fenced by another answers 503 while ready."""
    for index, server in enumerate(deployment.servers):
        url = f"{server.url}/v1/stream/bench-probe-{index}-{int(time.time())}"
        request = urllib.request.Request(url, method="PUT", headers={"Content-Type": "text/plain"})
        try:
            with urllib.request.urlopen(request, timeout=30):
                continue
        except urllib.error.HTTPError as error:
            status = f"HTTP {error.code}"
        except OSError as error:
            status = str(error)
        raise targets.TargetError(
            f"durable-kafka instance {index + 1} of {len(deployment.servers)} is ready but "
            f"refused a write ({status}): several instances on one prefix need issue 6's "
            f"partition ownership; see {server.log_path}"
        )


def _start_instance(index: int, log_dir: Path, options: targets.TargetOptions) -> targets.Server:
    """One durable-kafka process; every instance shares the topic prefix (so the streams)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    port = targets.free_port()
    command = [str(Path(sys.executable).parent / "durable-kafka"), "serve"]
    command += ["--listen", f"127.0.0.1:{port}", "--bootstrap-servers", options.bootstrap_servers]
    command += ["--topic-prefix", options.topic_prefix, "--log-level", "warning"]
    command += ["--sse-max-duration-ms", str(options.sse_max_duration_ms)]
    log_path = log_dir / f"{targets.DURABLE_KAFKA}-{index}.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(command, cwd=targets.REPO, stdout=log, stderr=subprocess.STDOUT)
    server = targets.Server(targets.DURABLE_KAFKA, f"http://127.0.0.1:{port}", process, log_path)
    if not _ready(server, timeout_s=60):
        targets.stop(server)
        what = "exited" if process.poll() is not None else "never answered /readyz 200"
        hint = " (several instances on one prefix need issue 6's ownership)" if index else ""
        raise targets.TargetError(
            f"durable-kafka instance {index + 1} {what} within 60 s{hint}; see {log_path}"
        )
    return server


def _ready(server: targets.Server, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and server.process.poll() is None:
        try:
            with urllib.request.urlopen(f"{server.url}/readyz", timeout=2) as reply:
                if reply.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    return False
