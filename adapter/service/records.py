"""How stream events become Kafka records, in the format `topology.wire` defines.

Data records carry exactly the bytes appended.
"""

from __future__ import annotations

from adapter.log.writer import Record
from adapter.protocol.headers import ProducerHeaders
from topology.wire import ControlEvent, ProducerStamp, control_headers, data_headers, stream_key


def data_records(
    topic: str,
    partition: int,
    stream_id: str,
    content_type: str,
    messages: list[bytes],
    producer: ProducerHeaders | None = None,
) -> list[Record]:
    stamp = None if producer is None else _stamp(producer)
    headers = data_headers(content_type, stamp)
    key = stream_key(stream_id)
    return [Record(topic, partition, key, message, headers) for message in messages]


def control_record(topic: str, partition: int, stream_id: str, event: str) -> Record:
    """A lifecycle event (create, close, delete), ordered with the data in its partition."""
    headers = control_headers(ControlEvent(event))
    return Record(topic, partition, stream_key(stream_id), b"", headers)


def _stamp(producer: ProducerHeaders) -> ProducerStamp:
    return ProducerStamp(producer.producer_id, producer.epoch, producer.seq)
