"""The benchmark suite's targets: durable-kafka (one or several instances) and the references."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeGuard

from bench import targets
from devstack.process import free_port


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
        """Every server process, `--workers` processes included (the parent's first)."""
        return [pid for server in self.servers for pid in targets.process_tree(server.pid)]

    def alive(self) -> bool:
        return all(server.process.poll() is None for server in self.servers)

    def stop(self) -> None:
        for server in self.servers:
            targets.stop(server)


def row_name(target: str, instances: int, workers: int = 1) -> str:
    if target != targets.DURABLE_KAFKA:
        return target
    return (
        target
        + (f"x{instances}" if instances > 1 else "")
        + (f"-w{workers}" if workers > 1 else "")
    )


def start(target: str, log_dir: Path, options: targets.TargetOptions, instances: int) -> Deployment:
    if target != targets.DURABLE_KAFKA:
        return Deployment(target, [targets.start(target, log_dir, options)])
    deployment = Deployment(row_name(target, instances, options.workers))
    try:
        for index in range(instances):
            deployment.servers.append(_start_instance(index, log_dir, options))
        if instances > 1 or options.workers > 1:
            _wait_settled(deployment, timeout_s=60)
            _check_writes(deployment)
    except targets.TargetError:
        deployment.stop()
        raise
    return deployment


SETTLE_POLL_S = 0.2
READYZ_ASKS = 12  # per instance and poll: each worker answers one with a 1 - 2**-11 chance


@dataclass(frozen=True)
class Ownership:
    """One instance's write slots, from the fields of its `/readyz` `ownership` check."""

    owned: frozenset[int]
    slot_count: int
    initialising: frozenset[int]


def ownership(report: object) -> Ownership | None:
    """The ownership check of a `/readyz` report (None: absent, or not the fields expected)."""
    check = report.get("checks", {}).get("ownership") if isinstance(report, dict) else None
    if not isinstance(check, dict):
        return None
    owned, count, initialising = (check.get(k) for k in _OWNERSHIP_FIELDS)
    if not (_slots(owned) and _slots(initialising) and isinstance(count, int)):
        return None
    return Ownership(frozenset(owned), count, frozenset(initialising))


_OWNERSHIP_FIELDS = ("owned_slots", "slot_count", "initialising")


def _slots(value: object) -> TypeGuard[list[int]]:
    return isinstance(value, list) and all(isinstance(k, int) for k in value)


def settled(instances: list[Ownership | None]) -> bool:
    """Every slot owned by exactly one instance, none initialising, all reporting alike."""
    seen: list[int] = []
    counts: set[int] = set()
    for found in instances:
        if found is None or found.initialising:
            return False
        seen += found.owned
        counts.add(found.slot_count)
    return len(counts) == 1 and sorted(seen) == list(range(counts.pop()))


def _wait_settled(deployment: Deployment, timeout_s: float) -> None:
    """Wait until the write slots are divided: a rebalance leaves some unowned for a while.

    With cooperative rebalancing a joining instance is assigned nothing in the first round
    (so it is ready, owning 0 slots) while the slots revoked from the others stay unowned
    until the second round, which starts at the joiner's next heartbeat; writes to them
    answer 503 until their new owner has initialised them.
    """
    deadline = time.monotonic() + timeout_s
    found: list[Ownership | None] = []
    while time.monotonic() < deadline:
        found = [_ownership(server) for server in deployment.servers]
        if settled(found):
            return
        time.sleep(SETTLE_POLL_S)
    raise targets.TargetError(
        f"the {len(deployment.servers)} durable-kafka instances did not divide the write "
        f"slots within {timeout_s:.0f} s: {found}"
    )


def _ownership(server: targets.Server) -> Ownership | None:
    """One instance's ownership per its `/readyz` (None if not ready, unreachable or unparsable).
    With `--workers`, the workers' together: each answer comes from whichever worker took the
    connection, so it asks (each on a new connection) until every worker has answered."""
    found: dict[frozenset[int], Ownership] = {}
    for _ in range(READYZ_ASKS):
        try:
            with urllib.request.urlopen(f"{server.url}/readyz", timeout=2) as reply:
                one = ownership(json.loads(reply.read()))
        except (urllib.error.URLError, OSError, ValueError):  # HTTPError (503) included
            return None
        if one is None:
            return None
        found[one.owned] = one
    owned = frozenset().union(*(one.owned for one in found.values()))
    if sum(len(one.owned) for one in found.values()) != len(owned):
        return None  # views from before and after a rebalance
    initialising = frozenset().union(*(one.initialising for one in found.values()))
    counts = {one.slot_count for one in found.values()}
    return Ownership(owned, counts.pop(), initialising) if len(counts) == 1 else None


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
            f"refused a write ({status}) after the write slots were divided; "
            f"see {server.log_path}"
        )


def _start_instance(index: int, log_dir: Path, options: targets.TargetOptions) -> targets.Server:
    """One durable-kafka process; every instance shares the topic prefix (so the streams)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    command = [str(Path(sys.executable).parent / "durable-kafka"), "serve"]
    command += ["--listen", f"127.0.0.1:{port}", "--bootstrap-servers", options.bootstrap_servers]
    command += ["--topic-prefix", options.topic_prefix, "--log-level", "warning"]
    command += ["--ops-listen", "127.0.0.1:0"]  # several instances: one ops port each
    command += ["--sse-max-duration-ms", str(options.sse_max_duration_ms)]
    command += ["--workers", str(options.workers)]
    log_path = log_dir / f"{targets.DURABLE_KAFKA}-{index}.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(command, cwd=targets.REPO, stdout=log, stderr=subprocess.STDOUT)
    server = targets.Server(targets.DURABLE_KAFKA, f"http://127.0.0.1:{port}", process, log_path)
    if not _ready(server, timeout_s=60):
        targets.stop(server)
        what = "exited" if process.poll() is not None else "never answered /readyz 200"
        hint = (
            " (several instances on one prefix need the ownership of write slots)" if index else ""
        )
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
