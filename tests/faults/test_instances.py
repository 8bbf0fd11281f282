"""An instance of the suite is ready only once it serves on its own port: another process
listening there (a port handed out to this suite and, on a machine shared with other test
runs, taken by one of theirs before the instance starts) is no instance of the scenario."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from devstack.process import free_port
from tests.cluster import cluster_env
from tests.faults.instances import Instance

pytestmark = pytest.mark.integration


class _Anything(http.server.BaseHTTPRequestHandler):
    """Another program's server: 200 to every GET, `/readyz` included."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def taken_port() -> Iterator[int]:
    port = free_port()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), _Anything)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        server.shutdown()
        server.server_close()


def test_an_instance_whose_port_another_process_took_is_never_ready(
    kafka_bootstrap: str, unique: str, tmp_path: Path, taken_port: int
) -> None:
    env = cluster_env(kafka_bootstrap, f"taken{unique}.", tmp_path)
    instance = Instance("fresh", env, tmp_path / "fresh.log", port=taken_port, workers=1)
    instance.start()
    try:
        with pytest.raises(AssertionError) as ended:
            instance.wait_ready()
        assert "Address already in use" in str(ended.value)
    finally:
        instance.stop()
