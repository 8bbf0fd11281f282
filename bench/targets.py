"""The servers a benchmark runs against: started here, measured through /proc, stopped here."""

from __future__ import annotations

import os
import resource
import select
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from devstack.process import free_port

REPO = Path(__file__).resolve().parent.parent
REFERENCE_SCRIPT = REPO / "conformance" / "reference-server.mjs"
CLK_TCK = os.sysconf("SC_CLK_TCK")

DURABLE_KAFKA = "durable-kafka"
REFERENCE_MEMORY = "reference-memory"
REFERENCE_FILE = "reference-file"
# bench/floor_server.py: what a Python server on aiohttp costs before any product code, with
# nothing behind it or with one Kafka transaction per batch of appends.
PYTHON_FLOOR = "python-floor"
PYTHON_KAFKA_FLOOR = "python-kafka-floor"
FLOORS = (PYTHON_FLOOR, PYTHON_KAFKA_FLOOR)
PROTOCOL_TARGETS = (DURABLE_KAFKA, REFERENCE_MEMORY, REFERENCE_FILE)  # the whole protocol
TARGETS = (*PROTOCOL_TARGETS, *FLOORS)


class TargetError(RuntimeError):
    """A server did not start, or died while measured."""


@dataclass
class Server:
    name: str
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid


@dataclass(frozen=True)
class TargetOptions:
    bootstrap_servers: str  # durable-kafka's
    topic_prefix: str  # durable-kafka's
    sse_max_duration_ms: int  # durable-kafka's
    long_poll_timeout_ms: int  # the reference's: it sends an idle SSE subscriber a control event
    node_args: tuple[str, ...] = ()  # the reference's, e.g. ("--cpu-prof",)
    workers: int = 1  # durable-kafka's `--workers`
    log_level: str = "warning"  # durable-kafka's: "info" logs a line per request (its default)
    checkout: Path = REPO  # durable-kafka's: the checkout whose `.venv` runs it
    ops_port: int = 0  # durable-kafka's operations listener (metrics); 0: any free port


def raise_fd_limit() -> int:
    """Soft RLIMIT_NOFILE up to the hard limit (children inherit it); returns the new soft."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = int(Path("/proc/sys/fs/nr_open").read_text())
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def start(name: str, log_dir: Path, dk: TargetOptions) -> Server:
    log_dir.mkdir(parents=True, exist_ok=True)
    if name == DURABLE_KAFKA:
        return _start_durable_kafka(log_dir / f"{name}.log", dk)
    if name in (REFERENCE_MEMORY, REFERENCE_FILE):
        memory = name == REFERENCE_MEMORY
        return _start_reference(name, log_dir / f"{name}.log", memory, dk)
    if name in FLOORS:
        return _start_floor(name, log_dir / f"{name}.log", dk)
    raise TargetError(f"unknown target {name!r}; known: {', '.join(TARGETS)}")


def _start_durable_kafka(log_path: Path, dk: TargetOptions) -> Server:
    port = free_port()
    command = [
        str(_console_script(dk.checkout)),
        "serve",
        "--listen",
        f"127.0.0.1:{port}",
        "--ops-listen",
        f"127.0.0.1:{dk.ops_port}",
        "--bootstrap-servers",
        dk.bootstrap_servers,
        "--topic-prefix",
        dk.topic_prefix,
        "--sse-max-duration-ms",
        str(dk.sse_max_duration_ms),
        "--log-level",
        dk.log_level,
        "--workers",
        str(dk.workers),
    ]
    return _launch(DURABLE_KAFKA, command, port, log_path, "/readyz")


def _console_script(checkout: Path) -> Path:
    """This interpreter's `durable-kafka`, or another checkout's (its own `.venv`)."""
    if checkout.resolve() == REPO:
        return Path(sys.executable).parent / "durable-kafka"
    return checkout / ".venv" / "bin" / "durable-kafka"


def _launch(name: str, command: list[str], port: int, log_path: Path, probe: str) -> Server:
    """Start a server listening on `port` (output to `log_path`); return it once `probe`
    answers (200, or 404 for a probe of a stream that is not there)."""
    with log_path.open("ab") as log:
        process = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    server = Server(name, f"http://127.0.0.1:{port}", process, log_path)
    _wait_ready(server, f"{server.url}{probe}", timeout_s=60)
    return server


def _start_reference(name: str, log_path: Path, memory: bool, options: TargetOptions) -> Server:
    command = ["node", *options.node_args, str(REFERENCE_SCRIPT), "0"]
    command += ["--long-poll-timeout", str(options.long_poll_timeout_ms)]
    command += ["--memory"] if memory else []
    with log_path.open("ab") as log:
        process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=log)
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], 30)
    line = process.stdout.readline().decode().strip() if ready else ""
    if not line.startswith("listening on "):
        stop(Server(name, "", process, log_path))
        raise TargetError(f"{name} did not start (stdout {line!r}); see {log_path}")
    server = Server(name, line.removeprefix("listening on "), process, log_path)
    _wait_ready(server, f"{server.url}/v1/stream/__bench_ready_probe", timeout_s=10)
    return server


def floor_topic(options: TargetOptions) -> str:
    """The topic python-kafka-floor writes, under durable-kafka's prefix of the run."""
    return f"{options.topic_prefix}python-kafka-floor"


def _start_floor(name: str, log_path: Path, options: TargetOptions) -> Server:
    port = free_port()
    mode = "kafka" if name == PYTHON_KAFKA_FLOOR else "memory"
    command = [sys.executable, "-m", "bench.floor_server", "--mode", mode, "--port", str(port)]
    command += ["--bootstrap-servers", options.bootstrap_servers]
    command += ["--topic", floor_topic(options)]
    return _launch(name, command, port, log_path, "/v1/stream/__bench_ready_probe")


def _wait_ready(server: Server, url: str, timeout_s: float) -> None:
    """Until `url` answers 200 (or 404 for the reference's probe path)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise TargetError(f"{server.name} exited with {server.process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return
        except OSError:
            pass
        time.sleep(0.2)
    stop(server)
    raise TargetError(f"{server.name} not ready after {timeout_s} s; see {server.log_path}")


def stop(server: Server, timeout_s: float = 20) -> float:
    """SIGTERM, then SIGKILL after `timeout_s`; returns how long it took to exit."""
    started = time.monotonic()
    if server.process.poll() is None:
        server.process.send_signal(signal.SIGTERM)
        try:
            server.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()
    if server.process.stdout is not None:
        server.process.stdout.close()
    return time.monotonic() - started


def code_version() -> str:
    """The commit of the work tree the servers run from, "+dirty" if adapter/ has changes."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False)
        return done.stdout.strip()

    dirty = git("status", "--porcelain", "--", "adapter")
    return git("rev-parse", "--short", "HEAD") + ("+dirty" if dirty else "")


def rss_kib(pid: int) -> int:
    """VmRSS of a live process, in KiB (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return 0
    return 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (0 once it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def process_tree(pid: int) -> list[int]:
    """`pid` and its children (a `--workers` parent's workers), whose CPU is theirs."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        children = []
    return [pid, *(int(child) for child in children)]


def machine_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    total = sum(values[:8])  # guest time is already in user/nice
    return total - idle, total
