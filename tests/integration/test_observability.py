"""Metrics on the ops listener move as a scripted workload says, their labels never name a
stream; every request has one JSON log line and an `X-Request-Id`; no credential is logged."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import jsonschema_rs
import pytest
import pytest_asyncio
from aiohttp import ClientSession, web
from prometheus_client.parser import text_string_to_metric_families

from adapter import log_output
from adapter.app import PARTS
from adapter.http import health
from adapter.http.ops_listener import create_ops_app
from tests.served import Served, ServedApp, exchange

ROOT = Path(__file__).resolve().parents[2]
REQUEST_LOG = jsonschema_rs.validator_for(
    json.loads((ROOT / "schemas" / "request_log.schema.json").read_text())
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

BUCKET = "observed"
OCTETS = {"Content-Type": "application/octet-stream"}
# Enough streams that a label naming them would show: all created, appended to and read;
# FULL_WORKLOADS of them also long-polled and missed next to.
MANY_STREAMS = 10_000
FULL_WORKLOADS = 1_000  # the others are created, appended to once and read
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@dataclass(frozen=True)
class Observed:
    api: Served
    metrics_url: str


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(served_adapter: ServedApp) -> AsyncIterator[Observed]:
    app, api = served_adapter.app, served_adapter.where
    ops = web.AppRunner(create_ops_app(app[PARTS].metrics, app[health.READINESS]))
    await ops.setup()
    site = web.TCPSite(ops, "127.0.0.1", 0)
    await site.start()
    host, port = ops.addresses[0][:2]
    try:
        async with ClientSession() as session, session.put(f"{api.url}/{BUCKET}") as made:
            assert made.status == 201
        yield Observed(api, f"http://{host}:{port}/metrics")
    finally:
        await ops.cleanup()


async def _scrape(server: Observed) -> Samples:
    async with ClientSession() as session, session.get(server.metrics_url) as response:
        assert response.status == 200
        text = await response.text()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def _moved(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return _value(after, name, **labels) - _value(before, name, **labels)


async def _workload(session: ClientSession, url: str, stream: str) -> None:
    """Create, three appends (3 + 4 + 5 bytes), a catch-up read, a long-poll, a miss."""
    path = f"{url}/{BUCKET}/{stream}"
    async with session.put(path, headers=OCTETS) as response:
        assert response.status == 201
    for body in (b"abc", b"defg", b"hijkl"):
        async with session.post(path, data=body, headers=OCTETS) as response:
            assert response.status == 204
    async with session.get(path, params={"offset": "-1"}) as response:
        assert await response.read() == b"abcdefghijkl"
    async with session.get(path, params={"offset": "-1", "live": "long-poll"}) as response:
        assert await response.read() == b"abcdefghijkl"
    async with session.get(f"{path}-missing", params={"offset": "-1"}) as response:
        assert response.status == 404


async def test_metrics_move_as_the_workload_says(server: Observed) -> None:
    before = await _scrape(server)
    async with ClientSession() as session:
        await _workload(session, server.api.url, "counted")
    after = await _scrape(server)
    route = "/{bucket}/{stream}"
    requests = "durable_kafka_http_requests_total"
    assert _moved(before, after, requests, method="PUT", route=route, status="201") == 1
    assert _moved(before, after, requests, method="POST", route=route, status="204") == 3
    assert _moved(before, after, requests, method="GET", route=route, status="200") == 2
    assert _moved(before, after, requests, method="GET", route=route, status="404") == 1
    duration = "durable_kafka_http_request_duration_seconds_count"
    assert _moved(before, after, duration, method="POST", route=route, status_class="2xx") == 3
    assert _moved(before, after, "durable_kafka_appended_bytes_total") == 12
    assert _moved(before, after, "durable_kafka_append_duration_seconds_count") == 3
    assert _moved(before, after, "durable_kafka_read_bytes_total", mode="catch-up") == 12
    assert _moved(before, after, "durable_kafka_read_bytes_total", mode="long-poll") == 12
    assert _moved(before, after, "durable_kafka_rejections_total", code="stream_not_found") == 1
    # Every append (and the creation) committed a transaction of its own: sequential requests.
    commits = "durable_kafka_kafka_duration_seconds_count"
    assert _moved(before, after, commits, stage="commit") >= 4
    assert _moved(before, after, commits, stage="produce") >= 4
    assert _value(after, "durable_kafka_sse_connections") == 0
    lag = {
        dict(labels)["topic"]: value
        for (name, labels), value in after.items()
        if name == "durable_kafka_consumer_lag_records"
    }
    assert set(lag) == {"meta", "producers", "owners", "snapshots", "tier"}
    assert all(value >= 0 for value in lag.values())
    checks = {
        dict(labels)["check"]: value
        for (name, labels), value in after.items()
        if name == "durable_kafka_check_ok"
    }
    assert checks["kafka"] == checks["object_store"] == checks["serving"] == 1
    failures = "durable_kafka_auth_failures_total"
    assert _moved(before, after, failures, reason="missing") == 0  # authentication is off
    assert any(name == "durable_kafka_build_info" for name, _ in after)


async def test_a_parser_refusal_is_counted(server: Observed) -> None:
    before = await _scrape(server)
    await exchange(server.api, b"GET /a\x00b HTTP/1.1\r\nHost: x\r\n\r\n")
    after = await _scrape(server)
    rejected = "durable_kafka_rejections_total"
    assert _moved(before, after, rejected, code="bad_request") == 1


async def test_live_gauges_count_open_sse_and_waiters(server: Observed) -> None:
    path = f"{server.api.url}/{BUCKET}/gauged"
    async with ClientSession() as session:
        async with session.put(path, headers=OCTETS) as response:
            assert response.status == 201
        query = {"offset": "now", "live": "sse"}
        async with session.get(path, params=query) as sse:
            assert sse.status == 200
            await sse.content.readline()  # the response has started
            during = await _scrape(server)
        assert _value(during, "durable_kafka_sse_connections") == 1
        await asyncio.sleep(0)
    for _ in range(100):  # the server sees the hang-up after the client closed
        if _value(await _scrape(server), "durable_kafka_sse_connections") == 0:
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the SSE connection was never counted as closed")


@pytest.mark.timeout(300)  # ~80 s alone, ~120 s beside another test process
async def test_many_streams_add_no_series(server: Observed) -> None:
    async with ClientSession() as session:
        await _workload(session, server.api.url, "warm-up")
        series = set(await _with_kafka_statistics(session, server))
        limit = asyncio.Semaphore(100)

        async def one(n: int) -> None:
            async with limit:
                if n < FULL_WORKLOADS:
                    await _workload(session, server.api.url, f"many-{n}")
                else:
                    await _light(session, server.api.url, f"many-{n}")

        await asyncio.gather(*(one(n) for n in range(MANY_STREAMS)))
    after = await _scrape(server)
    assert set(after) == series
    # The streams were really served: the appended bytes and the misses counted them.
    appended = _value(after, "durable_kafka_appended_bytes_total")
    assert appended >= 12 * (FULL_WORKLOADS + 1) + 2 * (MANY_STREAMS - FULL_WORKLOADS)


async def _with_kafka_statistics(
    session: ClientSession, server: Observed, timeout_s: float = 90
) -> Samples:
    """A scrape once librdkafka's first statistics are in: their series come with the interval
    (`kafka_statistics_interval_ms`), not with streams. A slot writer's producer hands its
    statistics over when it flushes a transaction, so appends go on meanwhile."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    wanted = {"durable_kafka_kafka_queued_messages", "durable_kafka_kafka_broker_rtt_seconds"}
    for n in itertools.count():
        samples = await _scrape(server)
        if wanted <= {name for name, _labels in samples}:
            return samples
        assert asyncio.get_running_loop().time() < deadline, "no librdkafka statistics came"
        await _light(session, server.api.url, f"statistics-{n}")
        await asyncio.sleep(0.5)
    raise AssertionError("unreachable")


async def _light(session: ClientSession, url: str, stream: str) -> None:
    """A real stream, cheaply: created, one append (2 bytes), one read."""
    path = f"{url}/{BUCKET}/{stream}"
    async with session.put(path, headers=OCTETS) as response:
        assert response.status == 201
    async with session.post(path, data=b"ok", headers=OCTETS) as response:
        assert response.status == 204
    async with session.get(path, params={"offset": "-1"}) as response:
        assert await response.read() == b"ok"


async def test_request_ids_are_kept_or_made_and_echoed(server: Observed) -> None:
    async with ClientSession() as session:
        given = {"X-Request-Id": "client-id.42"}
        async with session.get(f"{server.api.url}/healthz", headers=given) as response:
            assert response.headers["X-Request-Id"] == "client-id.42"
        unsafe = {"X-Request-Id": "a b;" + "x" * 200}
        async with session.get(f"{server.api.url}/healthz", headers=unsafe) as response:
            made = response.headers["X-Request-Id"]
            assert len(made) == 32
            assert made.isalnum()
        path = f"{server.api.url}/{BUCKET}/ids"
        async with session.put(path, headers=OCTETS) as response:
            assert "X-Request-Id" in response.headers
        async with session.get(path, params={"offset": "now", "live": "sse"}) as sse:
            assert "X-Request-Id" in sse.headers  # a streamed answer carries it too
    refused = await exchange(server.api, b"GET /a\x00b HTTP/1.1\r\nHost: x\r\n\r\n")
    assert len(refused.headers["x-request-id"]) == 32


async def test_one_json_line_per_request_and_no_credentials(
    server: Observed, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    token, query_token = f"tok-{uuid.uuid4().hex}", f"qtok-{uuid.uuid4().hex}"
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    path = f"{server.api.url}/{BUCKET}/logged"
    headers = {**OCTETS, "Authorization": f"Bearer {token}", "traceparent": traceparent}
    async with ClientSession() as session:
        async with session.put(path, headers=headers) as response:
            assert response.status == 201
        async with session.post(path, data=b"x", headers=headers) as response:
            assert response.status == 204
            request_id = response.headers["X-Request-Id"]
        query = {"offset": "-1", "access_token": query_token}
        async with session.get(path, params=query, headers=headers) as response:
            assert response.status == 200
    formatter = log_output.formatter("json")
    lines = [formatter.format(record) for record in caplog.records]
    assert not [line for line in lines if token in line or query_token in line]
    requests = [json.loads(line) for line in lines if '"durable_kafka.requests"' in line]
    for line in requests:
        REQUEST_LOG.validate(line)
    assert [(r["method"], r["status"]) for r in requests] == [
        ("PUT", 201),
        ("POST", 204),
        ("GET", 200),
    ]
    append = requests[1]
    assert append["request_id"] == request_id
    assert append["route"] == "/{bucket}/{stream}"
    assert append["traceparent"] == traceparent
    assert append["bytes_in"] == 1
    assert append["duration_ms"] >= 0
    assert {"time", "level", "logger", "message", "remote", "bytes_out"} <= append.keys()
    # Where the append went in Kafka; no principal while authentication is off.
    assert append["kafka_topic"].endswith(f"bucket.{BUCKET}")
    assert append["kafka_offset"] >= 0
    assert "principal" not in append
    assert not any(key.startswith("kafka_") for key in requests[2])  # a read has none
