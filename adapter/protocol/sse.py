"""Server-Sent Events framing of stream data and control events (§5.8)."""

from __future__ import annotations

import base64
import json

from adapter.protocol import json_mode
from adapter.protocol.headers import is_json, is_text_like

CONTENT_TYPE = "text/event-stream"
ENCODING_HEADER = "Stream-SSE-Data-Encoding"
HEARTBEAT = b": keep-alive\n\n"


def uses_base64(content_type: str) -> bool:
    """Binary streams (neither text/* nor application/json) carry base64 data events."""
    return not is_text_like(content_type)


def data_event(content_type: str, messages: list[bytes]) -> bytes:
    """One `data` event holding a batch: a JSON array, the text itself, or base64."""
    if is_json(content_type):
        text = json_mode.render_array(messages).decode()
    elif uses_base64(content_type):
        text = base64.b64encode(b"".join(messages)).decode()
    else:
        text = b"".join(messages).decode("utf-8", errors="replace")
    return event("data", text)


def control_event(next_offset: str, cursor: str | None, up_to_date: bool, closed: bool) -> bytes:
    """The `control` event after each data event (and alone at the tail)."""
    body: dict[str, object] = {"streamNextOffset": next_offset}
    if closed:
        body["streamClosed"] = True
        body["upToDate"] = True
    else:
        if cursor is not None:
            body["streamCursor"] = cursor
        if up_to_date:
            body["upToDate"] = True
    return event("control", json.dumps(body, separators=(",", ":")))


def event(name: str, text: str) -> bytes:
    """An SSE event; every line of `text` becomes a `data:` line (SSE joins them with \\n).

    CR, LF and CRLF all end a line in SSE, so each becomes a line break here: a payload can
    never end the event early or smuggle in a field. A reader strips one space after the
    colon, so a line that starts with a space gets one added.
    """
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    data = "".join(f"data:{' ' if line.startswith(' ') else ''}{line}\n" for line in lines)
    return f"event: {name}\n{data}\n".encode()
