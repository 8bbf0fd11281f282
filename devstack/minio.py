"""A MinIO server on loopback, built once from the Go module proxy and cached under the home."""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from devstack.go_tools import GoTool
from devstack.process import ServiceError, ServiceProcess, port_open

# The newest MinIO the Go module proxy serves, as a pseudo-version of its main module.
MINIO_VERSION = "v0.0.0-20260212201848-7aac2a2c5b7c"
START_TIMEOUT_S = 60.0
ACCESS_KEY = "minioadmin"
SECRET_KEY = "minioadmin"


@dataclass(frozen=True)
class MinioNode:
    """Where one MinIO server keeps its objects and which loopback ports it listens on."""

    home: Path
    port: int = 9000
    console_port: int = 9001

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def process(self) -> ServiceProcess:
        return ServiceProcess("minio", self.home)


def binary() -> Path:
    """The `minio` executable, built with `go install` on first use (several minutes)."""
    return GoTool("minio", "MinIO", "github.com/minio/minio", MINIO_VERSION).binary()


def is_live(endpoint_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{endpoint_url}/minio/health/live", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def start(node: MinioNode) -> str:
    """Start MinIO unless one already answers there; return its endpoint URL."""
    if is_live(node.endpoint_url):
        return node.endpoint_url
    if node.process.pid() is None:
        if port_open("127.0.0.1", node.port):
            raise ServiceError(f"port {node.port} is taken by another process")
        data = node.home / "data"
        data.mkdir(parents=True, exist_ok=True)
        argv = [
            str(binary()), "server", str(data),
            "--address", f"127.0.0.1:{node.port}",
            "--console-address", f"127.0.0.1:{node.console_port}",
        ]  # fmt: skip
        env = {
            "MINIO_ROOT_USER": os.environ.get("MINIO_ROOT_USER", ACCESS_KEY),
            "MINIO_ROOT_PASSWORD": os.environ.get("MINIO_ROOT_PASSWORD", SECRET_KEY),
            "MINIO_BROWSER": "off",
            "MINIO_UPDATE": "off",
        }
        node.process.spawn(argv, env)
    node.process.wait_ready(lambda: is_live(node.endpoint_url), START_TIMEOUT_S)
    return node.endpoint_url


def stop(node: MinioNode, timeout_s: float = 30.0) -> None:
    node.process.stop(timeout_s)
