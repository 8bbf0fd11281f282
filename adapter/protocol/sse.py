"""Server-Sent Events (§5.8): the events an SSE response sends, rendered in this one place.

`Events` is what both the per-request path and the broadcaster write: a chunk, or a position at
the tail, becomes its data event and control event (cursor and §8.1 jitter included), or the
final `streamClosed` event. Below it, the framing: data events per content type, control events,
and lines a payload cannot break out of.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable

from adapter.protocol import json_mode
from adapter.protocol.commands import Chunk
from adapter.protocol.cursors import current_interval, cursor_after, jitters
from adapter.protocol.headers import is_json, is_text_like
from adapter.protocol.offsets import encode

CONTENT_TYPE = "text/event-stream"
ENCODING_HEADER = "Stream-SSE-Data-Encoding"
HEARTBEAT = b": keep-alive\n\n"


class Events:
    """What a response sends at one position: a data event (if any), then its control event.

    Rendered once and shared by every client at that position (`shared`): the bytes differ only
    in the control event's cursor, and only for a client whose `cursor` is not behind the
    current interval (§8.1 jitter). When `closed`, the control event is the response's last.
    """

    __slots__ = ("_data", "_interval", "_jitter_s", "closed", "position", "shared", "up_to_date")

    def __init__(
        self,
        data: bytes,
        position: int,
        up_to_date: bool,
        closed: bool,
        now_ms: int,
        jitter_s: Callable[[], int] | None = None,
    ) -> None:
        self._data = data  # the data event, or b"" when there is nothing to send
        self.position = position  # the client's next offset once these are sent
        self.up_to_date = up_to_date
        self.closed = closed  # the tail of a closed stream: the response ends after these
        self._interval = current_interval(now_ms)
        self._jitter_s = jitter_s
        self.shared = data + self._control(None)

    def shared_by(self, cursor: int | None) -> bool:
        """Whether a client with this parsed `cursor` parameter gets `shared`."""
        return self.closed or not jitters(cursor, self._interval)

    def for_client(self, cursor: int | None) -> bytes:
        """The bytes for a client with this parsed `cursor` parameter: one write, never split."""
        return self.shared if self.shared_by(cursor) else self._data + self._control(cursor)

    def _control(self, cursor: int | None) -> bytes:
        offset = encode(self.position)
        if self.closed:
            return control_event(offset, None, True, True)
        answer = cursor_after(self._interval, cursor, self._jitter_s)
        return control_event(offset, answer, self.up_to_date, False)


def chunk_events(chunk: Chunk, now_ms: int, jitter_s: Callable[[], int] | None = None) -> Events:
    """A chunk read at the client's position; the last events if it reaches a closed tail."""
    data = data_event(chunk.meta.content_type, chunk.messages) if chunk.messages else b""
    closed = chunk.meta.closed and chunk.up_to_date
    return Events(data, chunk.next_offset, chunk.up_to_date, closed, now_ms, jitter_s)


def tail_events(
    position: int, closed: bool, now_ms: int, jitter_s: Callable[[], int] | None = None
) -> Events:
    """Nothing to send at the tail: the final `streamClosed` event, or an `upToDate` one."""
    return Events(b"", position, True, closed, now_ms, jitter_s)


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


def credential_expired_event(next_offset: str) -> bytes:
    """The last event of a response whose caller's token expired: a control event (clients
    resume from its offset as from any other) that says why, so they reconnect with a new one."""
    body = {"streamNextOffset": next_offset, "credentialExpired": True}
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
