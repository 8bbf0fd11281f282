"""How a decided write becomes Kafka records, in the format `topology.wire` defines.

Data records carry exactly the bytes appended.
"""

from __future__ import annotations

from adapter.log.writer import Record
from adapter.protocol.stream_machine import Write
from topology.wire import (
    FORWARD_HEADER,
    TRACE_HEADER,
    ControlEvent,
    Headers,
    control_headers,
    data_headers,
    stamp_headers,
    stream_key,
)


def write_records(
    topic: str,
    partition: int,
    stream_id: str,
    content_type: str,
    write: Write,
    forward_id: str | None = None,
    trace: bytes | None = None,
) -> list[Record]:
    """The Kafka records of a decided write, in the order of its entries; each one tagged
    with `forward_id` when another instance forwarded the request, and with `trace` (a W3C
    traceparent) when a traced request wrote it (see `topology.wire`)."""
    key = stream_key(stream_id)
    tag: Headers = [] if forward_id is None else [(FORWARD_HEADER, forward_id.encode())]
    if trace is not None:
        tag.append((TRACE_HEADER, trace))
    data = data_headers(content_type, write.stamp, write.seq) + tag
    stamp = stamp_headers(write.stamp, write.seq)
    return [
        Record(topic, partition, key, b"", control_headers(entry) + stamp + tag)
        if isinstance(entry, ControlEvent)
        else Record(topic, partition, key, entry.body, data)
        for entry in write.entries
    ]
