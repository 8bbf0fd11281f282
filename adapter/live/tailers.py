"""SSE sessions parked at the tail of a stream: what the broadcaster writes to, and how they end."""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass
from typing import Protocol


class Ending(enum.Enum):
    """Why the broadcaster hands a parked session back to its handler."""

    CLOSED = "closed"  # the final control event is written: end the response
    BEHIND = "behind"  # the client holds too much unsent data: drain it, then catch up
    GONE = "gone"  # the client disconnected
    EXPIRED = "expired"  # the response reached its maximum duration
    LOST = "lost"  # the stream changed under us (deleted, a read failed): the handler decides
    SHUTDOWN = "shutdown"  # the server is stopping


class Payload:
    """Event bytes rendered once and written to many clients, with their HTTP/1.1 chunk framing.

    The framing is made on first use and shared too: a chunked response needs it per write.
    """

    __slots__ = ("_chunked", "raw")

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self._chunked: bytes | None = None

    @property
    def chunked(self) -> bytes:
        if self._chunked is None:
            self._chunked = b"%x\r\n%s\r\n" % (len(self.raw), self.raw)
        return self._chunked


class Sink(Protocol):
    """A client connection: write without waiting, and say when the client cannot keep up."""

    def send(self, payload: Payload) -> Ending | None:
        """Queue the bytes; GONE if the client left, BEHIND if it holds too much unsent."""

    def gone(self) -> bool: ...


@dataclass(eq=False, slots=True)
class Tailer:
    """One SSE response waiting at `position`, the next offset its client has not seen."""

    sink: Sink
    position: int
    cursor: int | None  # the client's `cursor` parameter, parsed
    deadline: float  # event-loop time when the response must end
    written_at: float  # event-loop time of the last write, for heartbeats
    ended: asyncio.Future[Ending]

    def end(self, why: Ending) -> None:
        if not self.ended.done():
            self.ended.set_result(why)
