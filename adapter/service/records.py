"""How stream events become Kafka records: data records carry exactly the bytes appended."""

from __future__ import annotations

from adapter.log.reader import (
    CONTENT_TYPE_HEADER,
    CONTROL_HEADER,
    PRODUCER_EPOCH_HEADER,
    PRODUCER_ID_HEADER,
    PRODUCER_SEQ_HEADER,
)
from adapter.log.writer import Record
from adapter.protocol.headers import ProducerHeaders
from adapter.protocol.stream_machine import Lifecycle, Write


def data_records(
    topic: str,
    partition: int,
    stream_id: str,
    content_type: str,
    messages: list[bytes],
    producer: ProducerHeaders | None = None,
) -> list[Record]:
    headers: list[tuple[str, str | bytes | None]] = [(CONTENT_TYPE_HEADER, content_type.encode())]
    if producer is not None:
        headers += [
            (PRODUCER_ID_HEADER, producer.producer_id.encode()),
            (PRODUCER_EPOCH_HEADER, str(producer.epoch).encode()),
            (PRODUCER_SEQ_HEADER, str(producer.seq).encode()),
        ]
    key = stream_id.encode()
    return [Record(topic, partition, key, message, headers) for message in messages]


def control_record(topic: str, partition: int, stream_id: str, event: str) -> Record:
    """A lifecycle event (create, close, delete), ordered with the data in its partition."""
    return Record(topic, partition, stream_id.encode(), b"", [(CONTROL_HEADER, event.encode())])


def write_records(
    topic: str, partition: int, stream_id: str, content_type: str, write: Write
) -> list[Record]:
    """The Kafka records of a decided write, in the order of its entries."""
    data = iter(
        data_records(topic, partition, stream_id, content_type, write.messages, write.stamp)
    )
    return [
        control_record(topic, partition, stream_id, entry.value)
        if isinstance(entry, Lifecycle)
        else next(data)
        for entry in write.entries
    ]
