"""The monitoring kit in deploy/monitoring/: the alerting rules pass `promtool check rules` and
their unit tests, the dashboard's queries parse, and every metric the dashboard and the rules
name is exported by `serve --workers 2` after some traffic, each worker reporting its own
process."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from devstack import promtool as promtool_tool
from tests.adapter_process import running_adapter, worker_pids
from tests.cluster import TEXT, cluster_env, past_moves
from topology.internal_records import NEWEST_LEVEL

pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "deploy" / "monitoring"
RULES = MONITORING / "alerts.yaml"
DASHBOARD = MONITORING / "dashboard.json"
# Series Prometheus makes itself for each target, not exported by the server.
MADE_BY_PROMETHEUS = frozenset({"up"})
METRIC = re.compile(r"\b(?:durable_kafka|process|python)_[a-zA-Z0-9_]+\b|\bup\b")
OPS_URL = re.compile(r"ops listener on (http://127\.0\.0\.1:\d+)")
STREAMS = [f"m{i}" for i in range(16)]  # enough that both workers own some


@pytest.fixture(scope="module")
def promtool() -> Path:
    if not promtool_tool.is_cached():
        pytest.fail("promtool is not built: run `make deps`")
    return promtool_tool.binary()


def _run(promtool: Path, *args: str) -> str:
    result = subprocess.run(
        [str(promtool), *args], cwd=MONITORING, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_the_alerting_rules_pass_promtool_and_their_unit_tests(promtool: Path) -> None:
    assert "SUCCESS" in _run(promtool, "check", "rules", RULES.name)
    assert "SUCCESS" in _run(promtool, "test", "rules", "alerts.test.yaml")


def test_the_dashboard_queries_parse(promtool: Path, tmp_path: Path) -> None:
    """Each query, its Grafana variables given values, checked as a recording rule's."""
    rules = [
        {"record": f"dashboard:query_{i}", "expr": _as_promql(expr)}
        for i, expr in enumerate(_dashboard_queries())
    ]
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    assert "SUCCESS" in _run(promtool, "check", "rules", str(path))


def test_every_alert_and_dashboard_query_names_a_metric() -> None:
    for expr in [*_rule_queries(), *_dashboard_queries()]:
        assert METRIC.search(expr), expr


@pytest.mark.timeout(300)  # two workers on a fresh broker; the scrapes wait one interval
async def test_every_metric_the_dashboard_and_rules_name_is_exported(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    named = {name for expr in [*_rule_queries(), *_dashboard_queries()] for name in _names(expr)}
    env = cluster_env(kafka_bootstrap, f"mo{unique}.", tmp_path)
    env["DURABLE_KAFKA_KAFKA_STATISTICS_INTERVAL_MS"] = "500"
    env["DURABLE_KAFKA_LONG_POLL_TIMEOUT_MS"] = "500"  # the long-poll below answers soon
    log = tmp_path / "adapter.log"
    with running_adapter(env, log, workers=2) as base:
        ops = OPS_URL.findall(log.read_text())
        assert len(ops) == 2, log.read_text()
        await _traffic(base)
        missing, scrapes = await _until_exported(base, ops, named - MADE_BY_PROMETHEUS)
        assert missing == set(), f"named but not exported: {sorted(missing)}"
        started = sorted(_start_time(pid) for pid in worker_pids(int(base.rpartition(":")[2])))
    # Each worker's registry, behind its own ops listener, reports its own process.
    assert sorted(_value(s, "process_start_time_seconds") for s in scrapes) == started
    # Between them the workers own every write slot, once.
    owned = sum(_value(s, "durable_kafka_write_slots_owned") for s in scrapes)
    assert owned == _value(scrapes[0], "durable_kafka_write_slots")
    # A fresh deployment writes the newest record format level from the start.
    assert [_value(s, "durable_kafka_format_level") for s in scrapes] == [NEWEST_LEVEL] * 2


def _rule_queries() -> list[str]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [str(rule["expr"]) for group in groups for rule in group["rules"]]


def _dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    found = [t["expr"] for panel in _panels(dashboard["panels"]) for t in panel.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        query = variable.get("query")
        if isinstance(query, dict):  # label_values(metric, label): the metric's name
            found.append(re.sub(r"^label_values\((.*), \w+\)$", r"\1", query["query"]))
    return found


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


def _as_promql(expr: str) -> str:
    """Grafana's variables replaced as it would for one choice of them."""
    return expr.replace("$__rate_interval", "1m").replace("$job", ".*").replace("$instance", ".*")


def _names(expr: str) -> set[str]:
    """The metric names a query reads (label values in quotes left out)."""
    return set(METRIC.findall(re.sub(r'"[^"]*"', '""', expr)))


async def _traffic(base: str) -> None:
    """Creates, appends, reads, a refused request and a long-poll on fresh connections (so on
    both workers): the labelled series exist once a request made them."""
    connector = aiohttp.TCPConnector(force_close=True)
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        for stream in STREAMS:
            url = f"{base}/v1/stream/{stream}"
            # Sent again past the documented 503 of a slot moving between the workers.
            status, body = await past_moves(session, "PUT", url, headers=TEXT)
            assert status == 201, body
            status, body = await past_moves(session, "POST", url, data=b"hello\n", headers=TEXT)
            assert status in (200, 204), body
            async with session.get(url, params={"offset": "-1"}) as reply:
                assert reply.status == 200, await reply.text()
        async with session.get(f"{base}/v1/stream/never-made") as reply:
            assert reply.status == 404
        live = {"offset": "now", "live": "long-poll"}
        async with session.get(f"{base}/v1/stream/{STREAMS[0]}", params=live) as reply:
            assert reply.status in (200, 204), await reply.text()


async def _until_exported(
    base: str, ops: list[str], named: set[str], timeout_s: float = 60
) -> tuple[set[str], list[str]]:
    """Scrape every worker until all of `named` is among their samples (librdkafka's statistics
    come each interval, a producer's when it next flushes: appends keep the writers busy).
    Returns what is still missing and the last scrapes."""
    deadline = time.monotonic() + timeout_s
    async with aiohttp.ClientSession() as session:
        while True:
            scrapes = [await _scrape(session, url) for url in ops]
            missing = named - {name for text in scrapes for name in _sample_names(text)}
            if not missing or time.monotonic() > deadline:
                return missing, scrapes
            url = f"{base}/v1/stream/{STREAMS[len(missing) % len(STREAMS)]}"
            status, body = await past_moves(session, "POST", url, data=b"again\n", headers=TEXT)
            assert status in (200, 204), body
            await asyncio.sleep(0.2)


async def _scrape(session: aiohttp.ClientSession, ops_url: str) -> str:
    async with session.get(f"{ops_url}/metrics") as reply:
        assert reply.status == 200
        return await reply.text()


def _sample_names(text: str) -> set[str]:
    return {
        sample.name for family in text_string_to_metric_families(text) for sample in family.samples
    }


def _value(text: str, name: str) -> float:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                return float(sample.value)
    raise AssertionError(f"{name} not in the scrape")


def _start_time(pid: int) -> float:
    """A process's start, in seconds since the epoch, computed as prometheus-client does."""
    ticks = os.sysconf("SC_CLK_TCK")
    stat = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    btime = next(
        float(line.split()[1])
        for line in Path("/proc/stat").read_text().splitlines()
        if line.startswith("btime")
    )
    return float(stat[19]) / ticks + btime
