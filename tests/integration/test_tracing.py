"""Tracing against a real collector (Jaeger): an append's trace crosses the instance that
forwarded it and its owner, reaches its Kafka transaction and its records' headers, and the
live deliveries of those records link back to it; with tracing off, none of it exists."""

from __future__ import annotations

import asyncio
import json
import secrets
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from adapter.app import create_app
from devstack.jaeger import JaegerNode
from tests.cluster import TEXT, Pair, partitions, stream_in, two_instances, until_read
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready
from tests.kafka_reads import committed_messages
from topology.naming import bucket_topic
from topology.placement import partition_for

Span = dict[str, Any]
Trace = dict[str, Any]
QUERY_S = 30.0  # spans are exported every 100 ms here; the machine may be slow


def traceparent(trace_id: str, span_id: str) -> str:
    return f"00-{trace_id}-{span_id}-01"


def header(message: Any, name: str) -> bytes | None:
    return next((value for key, value in message.headers() or [] if key == name), None)


def record_of(bootstrap: str, topic: str, partition: int, value: bytes) -> Any:
    """The committed record holding `value`, as a plain read_committed consumer reads it."""
    found = [m for m in committed_messages(bootstrap, topic, partition) if m.value() == value]
    assert len(found) == 1, f"{value!r} is in {len(found)} records of {topic}[{partition}]"
    return found[0]


def jaeger_get(node: JaegerNode, path: str) -> list[Trace]:
    try:
        with urllib.request.urlopen(f"{node.query_url}{path}", timeout=5) as response:
            data: list[Trace] = json.loads(response.read())["data"] or []
            return data
    except urllib.error.HTTPError as error:
        if error.code == 404:  # not there yet
            return []
        raise


async def spans_until(
    node: JaegerNode, path: str, found: Callable[[list[Span]], bool]
) -> list[Span]:
    """The spans of the traces `path` finds (each with its process), once `found` holds."""
    deadline = time.monotonic() + QUERY_S
    while True:
        traces = await asyncio.to_thread(jaeger_get, node, path)
        spans = [
            {**span, "process": trace["processes"][span["processID"]]}
            for trace in traces
            for span in trace["spans"]
        ]
        if found(spans):
            return spans
        assert time.monotonic() < deadline, f"the collector never had them: {spans}"
        await asyncio.sleep(0.2)


def named(spans: list[Span], operation: str) -> list[Span]:
    return [span for span in spans if span["operationName"] == operation]


def refs(span: Span, kind: str) -> set[tuple[str, str]]:
    return {(r["traceID"], r["spanID"]) for r in span["references"] if r["refType"] == kind}


def instance_of(span: Span) -> str:
    tags = {tag["key"]: tag["value"] for tag in span["process"]["tags"]}
    return str(tags["service.instance.id"])


def linked_to(operation: str, trace_id: str, span_id: str) -> Callable[[list[Span]], bool]:
    return lambda spans: any(
        (trace_id, span_id) in refs(span, "FOLLOWS_FROM") for span in named(spans, operation)
    )


async def sse_until(response: aiohttp.ClientResponse, text: bytes) -> None:
    """Read the SSE response until an event's data holds `text`."""
    async for line in response.content:
        if line.startswith(b"data:") and text in line:
            return


async def caught_up(response: aiohttp.ClientResponse) -> None:
    """Until the first control event: the session has read the stream to its tail."""
    async for line in response.content:
        if line.startswith(b"event: control"):
            return


async def test_an_append_is_one_trace_from_client_to_records_and_its_live_readers(
    kafka_bootstrap: str, jaeger: JaegerNode, unique: str, tmp_path: Path
) -> None:
    service = f"dk-{unique}"
    env = {
        "DURABLE_KAFKA_TRACING_ENDPOINT": jaeger.otlp_url,
        "DURABLE_KAFKA_TRACING_SERVICE_NAME": service,
        "OTEL_BSP_SCHEDULE_DELAY": "100",  # the SDK's own variable: export every 100 ms
    }
    prefix = f"tr{unique}."
    async with two_instances(kafka_bootstrap, prefix, tmp_path, env=env) as pair:
        await traced_append(pair, kafka_bootstrap, jaeger, prefix, service)


async def traced_append(
    pair: Pair, bootstrap: str, jaeger: JaegerNode, prefix: str, service: str
) -> None:
    session, forwarder, owner = pair.session, pair.a, pair.b
    stream = stream_in(prefix, pair.owners[owner], "traced")
    url = f"/v1/stream/{stream}"
    async with session.put(f"{owner}{url}", headers=TEXT) as created:
        assert created.status == 201
        tail = created.headers["Stream-Next-Offset"]

    async def known_to_forwarder() -> int:
        async with session.head(f"{forwarder}{url}") as head:
            return head.status

    assert await until_read(known_to_forwarder, 200) == 200  # its follower has the creation
    client_trace, client_span = secrets.token_hex(16), secrets.token_hex(8)
    payload = f"traced {client_trace}".encode()
    sse = await session.get(f"{owner}{url}", params={"offset": "-1", "live": "sse"})
    await caught_up(sse)  # parked with the fan-out: the append's delivery comes from there
    poll = asyncio.create_task(
        session.get(f"{forwarder}{url}", params={"offset": tail, "live": "long-poll"})
    )
    headers = {**TEXT, "traceparent": traceparent(client_trace, client_span)}
    async with session.post(f"{forwarder}{url}", data=payload, headers=headers) as appended:
        assert appended.status in (200, 204), await appended.text()
    async with asyncio.timeout(QUERY_S):
        await sse_until(sse, payload)
    sse.close()
    async with await poll as polled:
        assert polled.status == 200
        assert await polled.read() == payload

    # The client's trace: the forwarder's request span, the owner's under it, the Kafka
    # transaction under that; each instance reports as itself.
    route = "POST /v1/stream/{path}"
    spans = await spans_until(
        jaeger,
        f"/api/traces/{client_trace}",
        lambda spans: len(named(spans, route)) == 2 and bool(named(spans, "kafka transaction")),
    )
    (first,) = [
        s for s in named(spans, route) if (client_trace, client_span) in refs(s, "CHILD_OF")
    ]
    (second,) = [s for s in named(spans, route) if s is not first]
    assert refs(second, "CHILD_OF") == {(client_trace, first["spanID"])}
    assert instance_of(first) != instance_of(second)
    assert {first["process"]["serviceName"], second["process"]["serviceName"]} == {service}
    (transaction,) = named(spans, "kafka transaction")
    assert refs(transaction, "CHILD_OF") == {(client_trace, second["spanID"])}

    # The record, as any Kafka consumer reads it, names the transaction's span.
    topic = bucket_topic(prefix, "_default")
    record = record_of(
        bootstrap, topic, partition_for(stream.encode(), partitions(prefix)), payload
    )
    written = traceparent(client_trace, transaction["spanID"]).encode()
    assert header(record, "traceparent") == written

    # Each live delivery links to it: the owner's SSE fan-out (from its hot tail) and the
    # forwarder's long-poll (from Kafka, the header read back).
    linked = partial_query(service)
    for operation in ("sse delivery", "long-poll delivery"):
        await spans_until(
            jaeger,
            linked(operation),
            linked_to(operation, client_trace, transaction["spanID"]),
        )


def partial_query(service: str) -> Callable[[str], str]:
    def query(operation: str) -> str:
        fields = {"service": service, "operation": operation, "limit": "100", "lookback": "1h"}
        return f"/api/traces?{urllib.parse.urlencode(fields)}"

    return query


async def test_with_tracing_off_records_carry_no_trace_and_nothing_exports(
    client: Client, kafka_bootstrap: str, unique: str
) -> None:
    stream = "untraced"
    assert (await client.put(f"/v1/stream/{stream}", headers=TEXT)).status == 201
    headers = {**TEXT, "traceparent": traceparent(secrets.token_hex(16), secrets.token_hex(8))}
    appended = await client.post(f"/v1/stream/{stream}", data=b"plain", headers=headers)
    assert appended.status in (200, 204)
    topic = bucket_topic(f"t{unique}.", "_default")
    record = record_of(kafka_bootstrap, topic, partition_for(stream.encode(), 3), b"plain")
    assert header(record, "traceparent") is None
    assert not [t.name for t in threading.enumerate() if t.name.startswith("OtelBatch")]


def test_with_tracing_off_the_sdk_is_never_imported(tmp_path: Path) -> None:
    """The whole server's modules, and its parts built from default settings, import nothing
    of OpenTelemetry (the SDK and its exporter cost seconds of a start-up)."""
    script = (
        "import sys, asyncio\n"
        "import adapter.cli\n"
        "from adapter.app import create_app\n"
        "from adapter.config import Settings\n"
        "async def main():\n"
        "    create_app(Settings())\n"
        "asyncio.run(main())\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        cwd=tmp_path,  # the parts' folders (.data/...) are made there
    )
    assert found.stdout.strip() == "[]", found.stdout


async def test_every_write_of_a_request_has_its_kafka_transaction_span(
    aiohttp_client: ClientFactory,
    make_settings: SettingsFactory,
    jaeger: JaegerNode,
    unique: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Not only appends: a bucket's creation, a stream's creation and deletion, a mount, and
    both kinds of append to a writable mount each get a `kafka transaction` span under their
    request's; the records written for the request carry that span's context."""
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")  # the SDK's own: export every 100 ms
    service, mounted = f"dk-{unique}", f"mounted-{unique}"
    settings = make_settings(
        tracing_endpoint=jaeger.otlp_url, tracing_service_name=service, mount_topics=mounted
    )
    admin = AdminClient({"bootstrap.servers": settings.bootstrap_servers})
    admin.create_topics([NewTopic(mounted, num_partitions=1, replication_factor=1)])[
        mounted
    ].result(30)
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    mount = {"mount": {"topic": mounted, "content_type": "text/plain", "appends": True}}
    producer = {"Producer-Id": "p", "Producer-Epoch": "0", "Producer-Seq": "0"}
    writes: list[tuple[str, str, dict[str, str], bytes | None, int]] = [
        ("PUT", "/shop", {}, None, 201),
        ("PUT", "/shop/doc", TEXT, None, 201),
        ("DELETE", "/shop/doc", {}, None, 204),
        ("PUT", "/notes", {"Content-Type": "application/json"}, json.dumps(mount).encode(), 201),
        ("POST", "/notes/k", TEXT, f"plain {unique}".encode(), 204),
        ("POST", "/notes/k", TEXT | producer, f"once {unique}".encode(), 200),
    ]
    traced: list[bytes] = []  # each write's transaction span, as a record's header names it
    for method, path, headers, body, status in writes:
        for _ in range(200):  # a mount answers 503 until its index is built: a trace each
            trace, parent = secrets.token_hex(16), secrets.token_hex(8)
            sent = {**headers, "traceparent": traceparent(trace, parent)}
            response = await client.request(method, path, data=body, headers=sent)
            if response.status != 503:
                break
            await asyncio.sleep(0.1)
        assert response.status == status, (method, path, await response.text())
        spans = await spans_until(
            jaeger,
            f"/api/traces/{trace}",
            lambda s: len(s) == 2 and bool(named(s, "kafka transaction")),
        )
        (request,) = [s for s in spans if (trace, parent) in refs(s, "CHILD_OF")]
        (transaction,) = named(spans, "kafka transaction")
        assert refs(transaction, "CHILD_OF") == {(trace, request["spanID"])}, (method, path)
        traced.append(traceparent(trace, transaction["spanID"]).encode())

    bootstrap, topic = settings.bootstrap_servers, bucket_topic(settings.topic_prefix, "shop")
    carried = [
        header(message, "traceparent")
        for message in committed_messages(bootstrap, topic, partition_for(b"doc", 3))
    ]
    assert {traced[1], traced[2]} <= set(carried)  # the creation's and the deletion's records
    plain = record_of(bootstrap, mounted, 0, f"plain {unique}".encode())
    once = record_of(bootstrap, mounted, 0, f"once {unique}".encode())
    assert (header(plain, "traceparent"), header(once, "traceparent")) == (traced[4], traced[5])
