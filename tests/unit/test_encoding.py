"""Decoding request bodies: whole in any chunking, never more than one piece per step."""

from __future__ import annotations

import asyncio
import gzip
import tracemalloc
import zlib
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web
from aiohttp.base_protocol import BaseProtocol
from aiohttp.streams import StreamReader
from aiohttp.test_utils import make_mocked_request
from backports import zstd

from adapter.http.encoding import (
    PIECE,
    Decoder,
    GzipDecoder,
    ZstdDecoder,
    bounded_body,
    decoded_body,
    decoder,
)
from adapter.protocol.errors import ErrorCode, ProtocolError

BODY = bytes(range(256)) * 3000  # 768 KB, several pieces


def _coded(coding: str, data: bytes) -> bytes:
    return gzip.compress(data) if coding == "gzip" else zstd.compress(data)


def _fed(coded: Decoder, data: bytes, chunk: int) -> list[bytes]:
    return [piece for i in range(0, len(data), chunk) for piece in coded.feed(data[i : i + chunk])]


@pytest.mark.parametrize("coding", ["gzip", "zstd"])
@pytest.mark.parametrize("chunk", [1 << 20, 4096, 7])
def test_a_body_decodes_whole_in_pieces_of_at_most_piece(coding: str, chunk: int) -> None:
    coded = decoder(coding)
    pieces = _fed(coded, _coded(coding, BODY), chunk)
    assert b"".join(pieces) == BODY
    assert max(len(piece) for piece in pieces) <= PIECE
    assert coded.finished()


@pytest.mark.parametrize("coding", ["gzip", "zstd"])
def test_members_and_frames_one_after_another_decode_as_one_body(coding: str) -> None:
    coded = decoder(coding)
    data = _coded(coding, b"one ") + _coded(coding, b"two")
    assert b"".join(coded.feed(data)) == b"one two"
    assert coded.finished()


@pytest.mark.parametrize("coding", ["gzip", "zstd"])
def test_a_truncated_body_is_not_finished(coding: str) -> None:
    coded = decoder(coding)
    decoded = b"".join(coded.feed(_coded(coding, BODY)[:-9]))
    assert BODY.startswith(decoded)  # what came so far, perhaps all, but no end seen
    assert not coded.finished()


def test_a_bomb_yields_a_bounded_piece_at_a_time() -> None:
    bomb = zstd.compress(b"\0" * (64 << 20))  # 64 MiB from a few KiB
    steps = ZstdDecoder().feed(bomb)
    assert [len(next(steps)) for _ in range(3)] == [PIECE] * 3  # never all at once


def test_gzip_garbage_raises_zlib_error() -> None:
    with pytest.raises(zlib.error):
        list(GzipDecoder().feed(b"not gzip at all"))


def test_a_zstd_frame_declaring_more_than_the_limit_is_refused_before_decoding() -> None:
    bomb = zstd.compress(b"\0" * (64 << 20))  # its header says 64 MiB
    with pytest.raises(ProtocolError) as refused:
        next(decoder("zstd", most=8 << 20).feed(bomb))
    assert refused.value.code is ErrorCode.PAYLOAD_TOO_LARGE


def test_a_zstd_frame_within_the_limit_decodes() -> None:
    assert b"".join(decoder("zstd", most=len(BODY)).feed(zstd.compress(BODY))) == BODY


def test_a_zstd_frame_needing_a_window_over_8_mib_is_refused() -> None:
    """A streamed frame (no declared size) asking a 128 MiB window: zstd's default would
    allocate it for a few KiB of body."""
    coder = zstd.ZstdCompressor(options={zstd.CompressionParameter.window_log: 27})
    parts = [coder.compress(BODY, zstd.ZstdCompressor.CONTINUE) for _ in range(2)]
    frame = b"".join(parts) + coder.flush()
    assert zstd.get_frame_info(frame).decompressed_size is None
    with pytest.raises(zstd.ZstdError, match="too much memory"):
        list(decoder("zstd").feed(frame))


def _request_with(body: bytes) -> web.Request:
    """A request whose payload is `body`, whole and ended."""
    payload = StreamReader(BaseProtocol(asyncio.get_running_loop()), len(body) + 1)
    payload.feed_data(body)
    payload.feed_eof()
    return make_mocked_request("POST", "/b/s", payload=payload)


async def _peak_of(read: Callable[[], Awaitable[bytes]]) -> tuple[bytes, int]:
    """What `read` answers, and the most memory it held at once beyond what it answers."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        body = await read()
        return body, tracemalloc.get_traced_memory()[1] - before - len(body)
    finally:
        tracemalloc.stop()


# An 8 MiB body decoded was copied whole once read: 16 MiB at once for a moment, the peak of a
# bomb of 8 KiB. What a body is read into grows by an eighth at a time, then is handed on.
ABOVE_THE_BODY = 1 / 4


async def test_a_decoded_body_is_held_once_not_copied() -> None:
    size = 4 * 2**20
    request = _request_with(gzip.compress(bytes(size)))
    limit = 2 * size
    body, above = await _peak_of(lambda: decoded_body(request, decoder("gzip", limit), limit))
    assert body == bytes(size)
    assert above <= size * ABOVE_THE_BODY


async def test_a_plain_body_is_held_once_not_copied() -> None:
    size = 4 * 2**20
    request = _request_with(bytes(size))
    body, above = await _peak_of(lambda: bounded_body(request, 2 * size))
    assert body == bytes(size)
    assert above <= size * ABOVE_THE_BODY


async def test_decoding_a_body_lets_the_loop_run_between_pieces() -> None:
    """A body already received decodes a piece a step: a bomb of 8 KiB is 128 pieces of
    decoding before its 413, which once ran as one callback while every other request
    waited."""
    size = 4 * 2**20
    request = _request_with(gzip.compress(bytes(size)))
    turns = 0

    async def other_requests() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    beside = asyncio.create_task(other_requests())
    await asyncio.sleep(0)
    try:
        await decoded_body(request, decoder("gzip", size), size)
    finally:
        beside.cancel()
    assert turns >= size // PIECE
