"""The spans of adapter/tracing/otel.py, recorded in memory: what each is a child of, the header
an append's records carry, and the links of a delivery."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

from adapter.config import Settings
from adapter.tracing import start, transaction_span
from adapter.tracing.otel import MAX_LINKS, TRANSACTION, Tracing

CLIENT_TRACE = "0af7651916cd43dd8448eb211c80319c"
CLIENT = f"00-{CLIENT_TRACE}-b7ad6b7169203331-01"


def recorded(sampled: bool = True) -> tuple[Tracing, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider() if sampled else TracerProvider(sampler=ALWAYS_OFF)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return Tracing(provider), exporter


def by_name(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    return {span.name: span for span in exporter.get_finished_spans()}


def transactions(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.name == TRANSACTION]


def test_tracing_is_off_without_an_endpoint() -> None:
    assert start(Settings()) is None


def test_an_append_transaction_is_a_child_of_its_request_and_names_itself_in_records() -> None:
    tracing, exporter = recorded()
    with tracing.request("POST", "/{bucket}/{stream}", CLIENT) as request:
        transaction = tracing.transaction("dk.shop", 3)
        tracing.answered(request, 204)
    assert transaction is not None
    transaction.committed([41, 43])
    spans = by_name(exporter)
    server, kafka = spans["POST /{bucket}/{stream}"], spans[TRANSACTION]
    assert server.context is not None
    assert kafka.context is not None
    assert f"{server.context.trace_id:032x}" == CLIENT_TRACE
    assert server.parent is not None
    assert f"{server.parent.span_id:016x}" == "b7ad6b7169203331"
    assert kafka.parent is not None
    assert kafka.parent.span_id == server.context.span_id
    assert transaction.traceparent == f"00-{CLIENT_TRACE}-{kafka.context.span_id:016x}-01".encode()
    assert kafka.attributes is not None
    assert kafka.attributes["messaging.kafka.offset"] == 41


def test_a_malformed_traceparent_starts_a_trace_of_its_own() -> None:
    tracing, exporter = recorded()
    with tracing.request("GET", "/healthz", "00-not-a-trace-01"):
        pass
    (span,) = exporter.get_finished_spans()
    assert span.parent is None


def test_a_request_forwarded_carries_its_span_as_the_parent() -> None:
    tracing, _exporter = recorded()
    headers = {"traceparent": CLIENT}
    with tracing.request("POST", "/{bucket}/{stream}", CLIENT) as request:
        tracing.inject(headers)
    assert headers["traceparent"] == (
        f"00-{CLIENT_TRACE}-{request.get_span_context().span_id:016x}-01"
    )


def test_an_unsampled_append_still_carries_its_callers_trace() -> None:
    tracing, exporter = recorded(sampled=False)
    unsampled = f"00-{CLIENT_TRACE}-b7ad6b7169203331-00"
    with tracing.request("POST", "/{bucket}/{stream}", unsampled):
        transaction = tracing.transaction("dk.shop", 0)
    assert transaction is not None
    transaction.committed([0])
    assert transaction.traceparent.decode().startswith(f"00-{CLIENT_TRACE}-")
    assert transaction.traceparent.endswith(b"-00")
    assert exporter.get_finished_spans() == ()


def test_a_delivery_links_each_append_once_and_a_bounded_number() -> None:
    tracing, exporter = recorded()
    appends = [f"00-{n:032x}-{n:016x}-01".encode() for n in range(1, MAX_LINKS + 10)]
    traces = [appends[0], appends[0], b"garbage", *appends[1:]]
    tracing.delivered("sse", ("shop", "orders"), traces, readers=3, root=True)
    (span,) = exporter.get_finished_spans()
    assert span.parent is None
    linked = [link.context.trace_id for link in span.links]
    assert linked == list(range(1, MAX_LINKS + 1))


async def test_a_transaction_span_ends_with_its_batch() -> None:
    tracing, exporter = recorded()
    loop = asyncio.get_running_loop()
    committed, failed = loop.create_future(), loop.create_future()
    for future in (committed, failed):
        with tracing.request("POST", "/{bucket}/{stream}", None):
            span = tracing.transaction("dk.shop", 0)
        assert span is not None
        future.add_done_callback(span.ended)
    committed.set_result([7])
    failed.set_exception(TimeoutError("commit"))
    await asyncio.sleep(0)  # done callbacks run on the next turn of the loop
    ok, error = transactions(exporter)
    assert ok.status.is_ok
    assert ok.attributes is not None
    assert ok.attributes["messaging.batch.message_count"] == 1
    assert not error.status.is_ok


def test_a_write_outside_a_request_starts_no_trace() -> None:
    tracing, exporter = recorded()
    assert tracing.transaction("dk.shop", 0) is None  # an expiry, a retention trim
    assert exporter.get_finished_spans() == ()


async def test_an_awaited_write_ends_its_span_as_its_block_ends() -> None:
    tracing, exporter = recorded()
    with tracing.request("PUT", "/{bucket}", None) as request:
        async with transaction_span(tracing, "dk.meta") as span:
            assert span is not None  # a state-only write: committed with no offsets
        with pytest.raises(TimeoutError):
            await _failing_write(tracing)
        async with transaction_span(tracing, "dk.mounted") as mounted:
            assert mounted is not None
            mounted.committed([5, 6], partition=2)  # what the block tells is kept
    async with transaction_span(None, "dk.meta") as off:
        assert off is None
    ok, error, told = transactions(exporter)
    for span_ in (ok, error, told):
        assert span_.name == TRANSACTION
        assert span_.parent is not None
        assert span_.parent.span_id == request.get_span_context().span_id
    assert ok.status.is_ok
    assert not error.status.is_ok
    assert told.attributes is not None
    assert told.attributes["messaging.destination.partition.id"] == "2"
    assert told.attributes["messaging.batch.message_count"] == 2


async def _failing_write(tracing: Tracing) -> None:
    async with transaction_span(tracing, "dk.mounted") as span:
        assert span is not None
        raise TimeoutError("commit")
