"""The adapter as a real child process, for tests that need it over HTTP (restarts, the suite)."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import resource
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path

from devstack.process import free_port
from tests import faulty_adapter

SCRIPT = str(Path(sys.executable).with_name("durable-kafka"))
# Tests run several adapters at once: each gets its ops listener on a port of its own.
OPS_ANY_PORT = ["--ops-listen", "127.0.0.1:0"]
# One serving process, as before `--workers`, unless TEST_ADAPTER_WORKERS asks for more (to run
# a tier against `serve --workers N`: docs/operations.md, "Workers").
WORKERS = ["--workers", os.environ.get("TEST_ADAPTER_WORKERS", "1")]
_URLS = re.compile(rb"https?://127\.0\.0\.1:\d+")


def program(env: Mapping[str, str], script: str = SCRIPT) -> list[str]:
    """What serves with `env`: the console script, or the same with the test-only faults `env`
    plants (tests/faulty_adapter.py)."""
    return faulty_adapter.COMMAND if faulty_adapter.plants(env) else [script]


def http_status(url: str, tls: ssl.SSLContext | None = None) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2, context=tls) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except (urllib.error.URLError, OSError):
        return 0


@contextlib.contextmanager
def running_adapter(
    env: Mapping[str, str],
    log: Path,
    port: int | None = None,
    workers: int | None = None,
    tls: ssl.SSLContext | None = None,
    nofile: int | None = None,
) -> Iterator[str]:
    """Serve `durable-kafka serve` with `env` until the block ends; yield its base URL.
    With `tls` (a client context trusting the adapter's certificate), over HTTPS: `env`
    then names the certificate and key. With `nofile`, the process may open at most that
    many descriptors (its `RLIMIT_NOFILE`, as `ulimit -n` sets it)."""
    port = port or free_port()
    base_url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    argv = [*program(env), "serve", "--listen", f"127.0.0.1:{port}", *OPS_ANY_PORT]
    argv += WORKERS if workers is None else ["--workers", str(workers)]
    started_at = log.stat().st_size if log.exists() else 0
    with (
        log.open("ab") as sink,
        subprocess.Popen(
            argv,
            env=os.environ | _own_catalog(log) | dict(env),
            stderr=sink,
            preexec_fn=None if nofile is None else functools.partial(_limit_descriptors, nofile),
        ) as proc,
    ):
        try:
            _wait_ready(base_url, proc, log, int(argv[-1]), tls, started_at)
            yield base_url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def _limit_descriptors(count: int) -> None:
    """In the child, before it runs the adapter."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (count, count))


def _wait_ready(
    base_url: str,
    proc: subprocess.Popen[bytes],
    log: Path,
    workers: int,
    tls: ssl.SSLContext | None = None,
    started_at: int = 0,
) -> None:
    """Until its log (from `started_at` on) says it serves on `base_url` and `/readyz` says
    200; with several workers, until each worker says so, their slots are split and each
    knows every slot's owner (the shared port answers from whichever worker is ready first,
    and the next one's joining moves slots: writes in between get 503). The log comes first:
    another test's server that took the port meanwhile answers `/readyz` too."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the adapter exited during start-up:\n{log.read_text()}")
        if (
            _logged_serving(log, base_url, started_at)
            and http_status(f"{base_url}/readyz", tls) == 200
            and (workers == 1 or _slots_split(worker_urls(log), workers, tls))
        ):
            return
        time.sleep(0.1)
    raise AssertionError(f"the adapter was not ready within 60s:\n{log.read_text()}")


def _logged_serving(log: Path, base_url: str, started_at: int) -> bool:
    """Whether the log, since `started_at`, says the process serves on `base_url`."""
    with log.open("rb") as lines:
        lines.seek(started_at)
        return f"serving on {base_url} ".encode() in lines.read()


def worker_urls(log: Path) -> list[str]:
    """Each worker's own URL, in worker order, as the log of `serve --workers N` last said."""
    lines = [line for line in log.read_bytes().splitlines() if b"workers: " in line]
    if not lines:
        return []
    return [url.decode() for url in _URLS.findall(lines[-1].partition(b"workers: ")[2])]


def _slots_split(urls: list[str], workers: int, tls: ssl.SSLContext | None = None) -> bool:
    """Whether every worker is ready, their owned slots are all the slots, once each, and each
    knows every other slot's owner (a write to any slot is served or forwarded, never 503)."""
    owned: list[int] = []
    count = None
    for url in urls:
        try:
            with urllib.request.urlopen(f"{url}/readyz", timeout=2, context=tls) as response:
                ownership = json.load(response)["checks"]["ownership"]
        except (OSError, ValueError, KeyError):
            return False
        if ownership.get("unroutable_slots") != []:
            return False
        owned += [int(slot) for slot in ownership.get("owned_slots") or {}]
        count = ownership.get("slot_count")
    return len(urls) == workers and count is not None and sorted(owned) == list(range(count))


def adapter_pid(port: int) -> int:
    """The pid of the adapter listening on `port` (found through /proc, as an operator would):
    with `--workers`, the parent's."""
    pids = _serving(port)
    parents = [pid for pid, ppid in pids.items() if ppid not in pids]
    if len(parents) != 1:
        raise AssertionError(f"no single adapter process found: {pids}")
    return parents[0]


def worker_pids(port: int) -> set[int]:
    """The pids of the workers of the adapter listening on `port` (`serve --workers N`)."""
    pids = _serving(port)
    return {pid for pid, ppid in pids.items() if ppid in pids}


def _serving(port: int) -> dict[int, int]:
    """Each `serve` process on `port` (the parent and its workers, which share its command
    line), with its parent's pid."""
    found: dict[int, int] = {}
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
            stat = (cmdline.parent / "stat").read_text()
        except OSError:
            continue
        if b"serve" in argv and f"127.0.0.1:{port}".encode() in argv:
            found[int(cmdline.parent.name)] = int(stat.rpartition(")")[2].split()[1])
    return found


def _own_catalog(log: Path) -> dict[str, str]:
    """The catalog's index files beside the log (they outlive the process: not in the repo)."""
    return {"DURABLE_KAFKA_CATALOG_DIR": str(log.parent / "catalog")}
