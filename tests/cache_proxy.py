"""Debian's nginx in front of an adapter: a real shared cache (`proxy_cache`), or a plain reverse
proxy with a `location` of the test's choosing; its config, cache and logs in a folder of the
test's own, on a free port (never the system's service)."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from devstack.nginx import nginx_path
from devstack.process import free_port, port_open

# Caches by URL only, as a CDN or a reverse proxy does unless told otherwise; `X-Cache` says
# whether an answer came from the cache. Runs as one process of the test's own user.
CONFIG = """
daemon off;
master_process off;
pid {home}/nginx.pid;
error_log {home}/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {home}/body;
    proxy_temp_path {home}/proxy;
    fastcgi_temp_path {home}/fastcgi;
    uwsgi_temp_path {home}/uwsgi;
    scgi_temp_path {home}/scgi;
    proxy_cache_path {home}/cache keys_zone=reads:1m;
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://127.0.0.1:{upstream};
{location}
        }}
    }}
}}
"""
CACHING = """
            proxy_http_version 1.1;
            proxy_cache reads;
            add_header X-Cache $upstream_cache_status always;
"""


@contextlib.contextmanager
def caching_proxy(upstream_port: int, home: Path) -> Iterator[str]:
    """nginx caching what the server on `upstream_port` lets it, until the block ends; yields
    its base URL."""
    with nginx_proxy(upstream_port, home, CACHING) as url:
        yield url


@contextlib.contextmanager
def nginx_proxy(upstream_port: int, home: Path, location: str = "") -> Iterator[str]:
    """nginx passing every request to the server on `upstream_port`, with `location`'s
    directives (none: nginx's defaults), until the block ends; yields its base URL."""
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config = home / "nginx.conf"
    config.write_text(
        CONFIG.format(home=home, port=port, upstream=upstream_port, location=location)
    )
    argv = [nginx_path(), "-p", str(home), "-e", str(home / "error.log"), "-c", str(config)]
    with subprocess.Popen(argv, stderr=subprocess.PIPE) as proc:
        try:
            _wait_listening(proc, port, home)
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def _wait_listening(proc: subprocess.Popen[bytes], port: int, home: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"nginx exited: {(home / 'error.log').read_text()}")
        if port_open("127.0.0.1", port):
            return
        time.sleep(0.05)
    raise AssertionError("nginx did not listen within 30 s")
