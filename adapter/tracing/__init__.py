"""OpenTelemetry tracing, off unless `tracing_endpoint` is set.

Importing the SDK and its OTLP exporter takes about two seconds of a start-up here, and every
request would pay for a span: so with tracing off nothing of OpenTelemetry is imported, no
middleware is installed and no header is added to records, and the parts that trace hold
`None` instead of a `Tracing` (adapter/tracing/otel.py, imported only by `start`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from adapter.config import Settings
    from adapter.tracing.otel import Tracing, TransactionSpan

# The W3C trace context header: on requests, and on every record an append writes.
TRACEPARENT = "traceparent"


def start(settings: Settings) -> Tracing | None:
    """This instance's tracing, or None when it is off."""
    if not settings.tracing_endpoint:
        return None
    from adapter.tracing.otel import exporting  # the SDK, only now that tracing is on

    return exporting(
        settings.tracing_endpoint,
        settings.tracing_service_name,
        settings.tracing_sample_ratio,
        settings.group_instance_id,
    )


@contextlib.asynccontextmanager
async def transaction_span(
    tracing: Tracing | None, topic: str, partition: int | None = None
) -> AsyncIterator[TransactionSpan | None]:
    """The span of the Kafka transaction a request's write awaits (None with tracing off, or
    outside a request): the records it writes carry `span.traceparent`; it ends as the block
    does, failed by an exception, else committed (with the offsets, if the block gave them
    to `span.committed`). A write whose transaction a group commit shares ends its span with
    its batch instead (`DecidedWrites.queue`)."""
    span = None if tracing is None else tracing.transaction(topic, partition)
    if span is None:
        yield None
        return
    try:
        yield span
    except BaseException as error:
        span.failed(error)
        raise
    span.committed(())
