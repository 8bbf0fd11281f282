"""Parked SSE sessions: shared payload framing and how a tailer ends."""

from __future__ import annotations

import asyncio

from adapter.live.tailers import Ending, Payload, Tailer
from adapter.protocol.sse import HEARTBEAT


class _Sink:
    def send(self, payload: Payload) -> Ending | None:
        return None

    def gone(self) -> bool:
        return False


def test_payload_frames_an_http_chunk_once() -> None:
    payload = Payload(HEARTBEAT)
    framed = payload.chunked
    assert framed == b"e\r\n: keep-alive\n\n\r\n"  # 14 bytes, in hex
    assert payload.chunked is framed  # made once, shared by every chunked client
    assert payload.raw is HEARTBEAT


async def test_a_tailer_ends_once_with_the_first_reason() -> None:
    loop = asyncio.get_running_loop()
    tailer = Tailer(_Sink(), 7, None, loop.time() + 60, loop.time(), loop.create_future())
    tailer.end(Ending.BEHIND)
    tailer.end(Ending.GONE)
    assert tailer.ended.result() is Ending.BEHIND
