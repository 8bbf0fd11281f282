"""SSE: the events of a response, byte for byte; data events per content type, control events,
and injection-proof lines."""

from __future__ import annotations

import base64
import json

import pytest

from adapter.protocol.commands import Chunk
from adapter.protocol.cursors import EPOCH_MS
from adapter.protocol.model import StreamMeta
from adapter.protocol.sse import (
    chunk_events,
    control_event,
    data_event,
    event,
    tail_events,
    uses_base64,
)

NOW = EPOCH_MS + 100 * 20_000 + 7_000  # cursor interval 100
TAIL = b'event: control\ndata:{"streamNextOffset":"0000000000000000_0000000000000004",'
CLOSED = TAIL + b'"streamClosed":true,"upToDate":true}\n\n'


def _chunk(
    content_type: str, messages: list[bytes], up_to_date: bool = True, closed: bool = False
) -> Chunk:
    meta = StreamMeta("b", "s", 0, content_type, 0, 0, 4, 0, 0, closed=closed)
    return Chunk(meta, messages, 0, 4, up_to_date)


def _jitter_40() -> int:
    return 40  # two intervals


def _fields(raw: bytes) -> tuple[str, str]:
    """(event name, data) of one event, parsed as an SSE client would."""
    text = raw.decode()
    assert text.endswith("\n\n")
    name, data = "", []
    for line in text[:-2].split("\n"):
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            name = value
        elif field == "data":
            data.append(value)
    return name, "\n".join(data)


def test_json_batches_are_one_array() -> None:
    assert _fields(data_event("application/json", [b'{"a":1}', b"[2]"])) == (
        "data",
        '[{"a":1},[2]]',
    )


def test_text_is_sent_as_is_line_by_line() -> None:
    assert _fields(data_event("text/plain", [b"one\n", b"two"])) == ("data", "one\ntwo")
    assert _fields(data_event("text/plain", [b"  indented"])) == ("data", "  indented")


def test_binary_is_base64() -> None:
    payload = bytes(range(256))
    name, data = _fields(data_event("application/octet-stream", [payload[:100], payload[100:]]))
    assert (name, base64.b64decode(data)) == ("data", payload)
    assert uses_base64("image/png")
    assert not uses_base64("text/csv")
    assert not uses_base64("application/json")


def test_payload_line_breaks_cannot_end_the_event() -> None:
    raw = event("data", "safe\r\n\r\nevent: control\rdata: {}\n\nend")
    assert raw.count(b"\n\n") == 1  # only the real end of the event
    assert b"\r" not in raw
    assert _fields(raw) == ("data", "safe\n\nevent: control\ndata: {}\n\nend")


def test_control_events() -> None:
    name, data = _fields(control_event("0000000000000000_0000000000000004", "42", True, False))
    assert name == "control"
    assert json.loads(data) == {
        "streamNextOffset": "0000000000000000_0000000000000004",
        "streamCursor": "42",
        "upToDate": True,
    }
    closed = json.loads(_fields(control_event("x", "42", False, True))[1])
    assert closed == {"streamNextOffset": "x", "streamClosed": True, "upToDate": True}


def test_a_text_chunk_is_its_data_event_then_its_control_event() -> None:
    events = chunk_events(_chunk("text/plain", [b"hello ", b"world"]), NOW)
    assert events.for_client(None) == (
        b"event: data\ndata:hello world\n\n" + TAIL + b'"streamCursor":"100","upToDate":true}\n\n'
    )
    assert (events.position, events.up_to_date, events.closed) == (4, True, False)


def test_a_json_chunk_is_one_array_and_a_cut_chunk_is_not_up_to_date() -> None:
    events = chunk_events(_chunk("application/json", [b'{"a":1}', b"[2]"], False), NOW)
    assert events.for_client(None) == (
        b'event: data\ndata:[{"a":1},[2]]\n\n' + TAIL + b'"streamCursor":"100"}\n\n'
    )
    assert not events.up_to_date


def test_a_binary_chunk_is_base64() -> None:
    events = chunk_events(_chunk("application/octet-stream", [b"\x00\xff", b"\n"]), NOW)
    assert events.for_client(None) == (
        b"event: data\ndata:AP8K\n\n" + TAIL + b'"streamCursor":"100","upToDate":true}\n\n'
    )


def test_a_chunk_reaching_a_closed_tail_ends_with_the_closed_event() -> None:
    events = chunk_events(_chunk("text/plain", [b"bye"], closed=True), NOW)
    assert events.closed
    assert events.for_client(None) == b"event: data\ndata:bye\n\n" + CLOSED
    assert events.shared_by(100)  # no cursor in the closed event, so no jitter either
    assert events.for_client(100) is events.shared


def test_a_closed_stream_cut_short_of_its_tail_is_not_over_yet() -> None:
    events = chunk_events(_chunk("text/plain", [b"more"], up_to_date=False, closed=True), NOW)
    assert not events.closed
    assert events.shared.endswith(TAIL + b'"streamCursor":"100"}\n\n')


def test_at_the_tail_one_up_to_date_control_event_or_the_closed_one() -> None:
    assert chunk_events(_chunk("text/plain", []), NOW).shared.startswith(TAIL)  # no data event
    assert tail_events(4, False, NOW).for_client(None) == (
        TAIL + b'"streamCursor":"100","upToDate":true}\n\n'
    )
    closed = tail_events(4, True, NOW)
    assert closed.closed
    assert closed.shared == CLOSED


@pytest.mark.parametrize("cursor", [None, 0, 99])
def test_clients_behind_the_interval_share_the_same_bytes(cursor: int | None) -> None:
    events = chunk_events(_chunk("text/plain", [b"x"]), NOW, _jitter_40)
    assert events.shared_by(cursor)
    assert events.for_client(cursor) is events.shared


@pytest.mark.parametrize(("cursor", "answer"), [(100, b"102"), (500, b"502")])
def test_a_client_not_behind_gets_a_jittered_cursor_of_its_own(cursor: int, answer: bytes) -> None:
    control = TAIL + b'"streamCursor":"' + answer + b'","upToDate":true}\n\n'
    events = chunk_events(_chunk("text/plain", [b"x"]), NOW, _jitter_40)
    assert not events.shared_by(cursor)
    assert events.for_client(cursor) == b"event: data\ndata:x\n\n" + control
    assert tail_events(4, False, NOW, _jitter_40).for_client(cursor) == control
