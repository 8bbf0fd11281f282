"""The spans of one instance, exported over OTLP/HTTP by a batching thread.

A span per request (named by its route template, never its path), continuing the caller's
`traceparent`; under an append's, a span for the Kafka transaction that holds its records,
whose context each record carries in its `traceparent` header, so a consumer (Spark, any
Kafka client) continues the trace; a span per live delivery (SSE or long-poll), linked to
the contexts read back from the delivered records' headers. The provider is this instance's
own, never OpenTelemetry's global one, so nothing else in the process (a library, a test
running several instances) reports through it by accident.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator, MutableMapping, Sequence
from contextlib import AbstractContextManager

from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import (
    Link,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    get_current_span,
    set_span_in_context,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from adapter.tracing import TRACEPARENT

SCOPE = "durable-kafka"
TRANSACTION = "kafka transaction"
# How many distinct appends one delivery links to: a catch-up of thousands of records must not
# make a span of thousands of links (the collector would drop it).
MAX_LINKS = 32


def exporting(endpoint: str, service_name: str, ratio: float, instance: str) -> Tracing:
    """Tracing whose spans a thread exports in batches to the collector at `endpoint`."""
    resource = Resource.create({"service.name": service_name, "service.instance.id": instance})
    provider = TracerProvider(resource=resource, sampler=ParentBased(TraceIdRatioBased(ratio)))
    exporter = OTLPSpanExporter(endpoint=f"{endpoint.rstrip('/')}/v1/traces")
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return Tracing(provider)


class Tracing:
    """This instance's tracer, over its own provider."""

    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer(SCOPE)
        self.propagator = TraceContextTextMapPropagator()

    def request(
        self, method: str, route: str, traceparent: str | None
    ) -> AbstractContextManager[Span]:
        """The current span of a request, a child of the caller's `traceparent` if valid."""
        carrier = {} if traceparent is None else {TRACEPARENT: traceparent}
        return self.tracer.start_as_current_span(
            f"{method} {route}",
            context=self.propagator.extract(carrier),  # an empty context: a new trace
            kind=SpanKind.SERVER,
            attributes={"http.request.method": method, "http.route": route},
            record_exception=False,  # errors are answers here: the status says which
            set_status_on_exception=False,
        )

    def inject(self, headers: MutableMapping[str, str]) -> None:
        """Set `traceparent` to the current span's context (a request forwarded to its
        owner: the owner's span is a child of this instance's)."""
        self.propagator.inject(headers)

    @staticmethod
    def answered(span: Span, status: int) -> None:
        """A request span's outcome: its status, an error for a 5xx (a 4xx is the client's)."""
        span.set_attribute("http.response.status_code", status)
        if status >= 500:
            span.set_status(Status(StatusCode.ERROR))

    def transaction(self, topic: str, partition: int | None) -> TransactionSpan | None:
        """A span for the Kafka transaction that commits a request's write, a child of the
        current one (the request's); None outside a request: a background write (an expiry,
        a retention trim) would start a trace of its own each time. `partition` None: the
        producer's partitioner picks it (a mounted topic), or the write holds state only."""
        if not get_current_span().get_span_context().is_valid:
            return None
        attributes = {
            "messaging.system": "kafka",
            "messaging.operation.type": "send",
            "messaging.destination.name": topic,
        }
        if partition is not None:
            attributes["messaging.destination.partition.id"] = str(partition)
        span = self.tracer.start_span(TRANSACTION, kind=SpanKind.PRODUCER, attributes=attributes)
        carrier: dict[str, str] = {}
        self.propagator.inject(carrier, context=set_span_in_context(span))
        return TransactionSpan(span, carrier[TRACEPARENT].encode())

    def delivered(
        self,
        mode: str,
        stream: tuple[str, str],
        traces: Iterable[bytes],
        readers: int,
        root: bool = False,
    ) -> None:
        """A live delivery of a stream's (bucket, id) records (`mode`: `sse` or `long-poll`) to
        `readers` readers: a
        span of its own, linked to each append whose context a record carried. Within a
        request it is the request span's child; the SSE fan-out's (`root`) start traces of
        their own, one for all the readers of a change."""
        links = [Link(context) for context in self._contexts(traces)]
        span = self.tracer.start_span(
            f"{mode} delivery",
            context=Context() if root else None,
            kind=SpanKind.CONSUMER,
            links=links,
            attributes={
                "messaging.system": "kafka",
                "messaging.operation.type": "process",
                "durable_kafka.bucket": stream[0],
                "durable_kafka.stream": stream[1],
                "durable_kafka.live.mode": mode,
                "durable_kafka.live.readers": readers,
            },
        )
        span.end()

    def _contexts(self, traces: Iterable[bytes]) -> Iterator[SpanContext]:
        seen: set[bytes] = set()
        linked = 0
        for value in traces:
            if value in seen:
                continue
            seen.add(value)
            carrier = {TRACEPARENT: value.decode("ascii", "replace")}
            context = get_current_span(self.propagator.extract(carrier)).get_span_context()
            if context.is_valid:
                yield context
                linked += 1
                if linked == MAX_LINKS:
                    return

    async def close(self) -> None:
        """Export what is left and stop the exporter's thread (a blocking flush: off the loop)."""
        await asyncio.to_thread(self.provider.shutdown)


class TransactionSpan:
    """The span of one write's Kafka transaction, and the header value naming it."""

    def __init__(self, span: Span, traceparent: bytes) -> None:
        self.span = span
        self.traceparent = traceparent
        self._ended = False  # ended once: by the first outcome told

    def ended(self, outcome: asyncio.Future[list[int]]) -> None:
        """The transaction's outcome (a done callback of the batch's future, which waiters
        never cancel): committed at these offsets, or failed."""
        if outcome.cancelled():
            self.failed(asyncio.CancelledError())
        elif (error := outcome.exception()) is not None:
            self.failed(error)
        else:
            self.committed(outcome.result())

    def committed(self, offsets: Sequence[int], partition: int | None = None) -> None:
        """Committed at `offsets` (of `partition`: where the producer's partitioner put them)."""
        if self._ended:
            return
        self._ended = True
        if partition is not None:
            self.span.set_attribute("messaging.destination.partition.id", str(partition))
        if offsets:
            self.span.set_attribute("messaging.kafka.offset", offsets[0])
        self.span.set_attribute("messaging.batch.message_count", len(offsets))
        self.span.end()

    def failed(self, error: BaseException) -> None:
        if self._ended:
            return
        self._ended = True
        self.span.record_exception(error)
        self.span.set_status(Status(StatusCode.ERROR, type(error).__name__))
        self.span.end()
