"""The trim route: `POST {stream}/trim` with `{"before": "<offset token>"}` (or `{"at":
<time>}`) removes the stream's messages below that offset (`adapter/protocol/trims.py` reads
the body, the stream machine's `Trim` decides). Administrators only: it removes data for every
reader."""

from __future__ import annotations

from aiohttp import web

from adapter.http.keys import STREAMS
from adapter.http.streams import stream_ref
from adapter.protocol.commands import StreamRef, Trim
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.offsets import BEGINNING, ReadFrom, encode
from adapter.protocol.snapshots import EARLIEST_HEADER
from adapter.protocol.trims import TrimAt, parse_trim
from adapter.service.streams import StreamService


async def trim(request: web.Request) -> web.Response:
    """204 with the stream's earliest offset after the trim, also when it changed nothing."""
    ref, asked = stream_ref(request), parse_trim(await request.read())
    streams = request.app[STREAMS]
    before = await _offset_of(streams, ref, asked) if isinstance(asked, TrimAt) else asked
    meta = await streams.trim(Trim(ref, before))
    headers = {
        EARLIEST_HEADER: encode(meta.earliest_offset),
        "Stream-Next-Offset": encode(meta.next_offset),
    }
    return web.Response(status=204, headers=headers)


async def _offset_of(streams: StreamService, ref: StreamRef, asked: TrimAt) -> ReadFrom:
    """The offset a trim by time stops at: the stream's first message appended at or after
    the moment (its tail if none was). A moment in what is already gone trims nothing more."""
    try:
        return await streams.source_for(ref.bucket_id).offset_at(ref, asked.at_ms)
    except ProtocolError as error:
        if error.code is not ErrorCode.OFFSET_GONE:
            raise
        return BEGINNING
