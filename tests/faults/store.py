"""The fault suite's own MinIO (the cold tier of its adapters), which faults kill, pause and
restart: started once beside the 3-broker cluster under the suite's home, on a free port that
the home remembers (`port`), so every scenario finds it again."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import boto3

from devstack import minio
from devstack.process import free_port

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


@dataclass(frozen=True)
class Store:
    node: minio.MinioNode
    access_key: str = minio.ACCESS_KEY
    secret_key: str = minio.SECRET_KEY

    @property
    def endpoint_url(self) -> str:
        return self.node.endpoint_url

    def env(self, s3_bucket: str) -> dict[str, str]:
        """The adapter settings of a cold tier in `s3_bucket` of this MinIO."""
        return {
            "DURABLE_KAFKA_COLD_BACKEND": "s3",
            "DURABLE_KAFKA_S3_BUCKET": s3_bucket,
            "DURABLE_KAFKA_S3_ENDPOINT_URL": self.endpoint_url,
            "DURABLE_KAFKA_S3_ACCESS_KEY_ID": self.access_key,
            "DURABLE_KAFKA_S3_SECRET_ACCESS_KEY": self.secret_key,
        }

    def client(self) -> S3Client:
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name="us-east-1",
        )

    def holds(self, s3_bucket: str, prefix: str) -> bool:
        """Whether any object's key starts with `prefix`."""
        listing = self.client().list_objects_v2(Bucket=s3_bucket, Prefix=prefix, MaxKeys=1)
        return bool(listing.get("KeyCount", 0))

    def kill9(self) -> None:
        self._signal(signal.SIGKILL)
        deadline = time.monotonic() + 30
        while self.node.process.pid() is not None and time.monotonic() < deadline:
            time.sleep(0.1)  # reaped: a restart must not find it "still running"

    def pause(self) -> None:
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def restart(self) -> None:
        """Start it again (same folder, same port) after a kill; returns once it is live."""
        minio.start(self.node)

    def _signal(self, sig: signal.Signals) -> None:
        pid = self.node.process.pid()
        if pid is not None:
            os.kill(pid, sig)


def _home(home: Path) -> Path:
    return home / "minio"


def start(home: Path) -> Store:
    folder = _home(home)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "port").write_text(f"{free_port()} {free_port()}")
    found = of(home)
    minio.start(found.node)
    return found


def of(home: Path) -> Store:
    """The suite's MinIO under `home` (started by `start`)."""
    port, console = map(int, (_home(home) / "port").read_text().split())
    return Store(minio.MinioNode(_home(home), port, console))


def stop(home: Path, timeout_s: float = 30.0) -> None:
    if (_home(home) / "port").exists():
        of(home).resume()
        minio.stop(of(home).node, timeout_s)
