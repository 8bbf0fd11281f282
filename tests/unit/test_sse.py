"""SSE framing: data events per content type, control events, and injection-proof lines."""

from __future__ import annotations

import base64
import json

from adapter.protocol.sse import control_event, data_event, event, uses_base64


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
