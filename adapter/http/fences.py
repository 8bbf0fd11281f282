"""The fence route: `POST {stream}/fence` with `Stream-Fencing-Token` sets the token every
later append to the stream must carry (`adapter/protocol/appends.py` checks it)."""

from __future__ import annotations

from aiohttp import web

from adapter.http.keys import STREAMS
from adapter.http.streams import stream_ref
from adapter.protocol.commands import Fence
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.headers import parse_fencing_token
from adapter.protocol.offsets import encode
from adapter.protocol.stream_etags import stream_etag


async def fence(request: web.Request) -> web.Response:
    token = parse_fencing_token(request.headers.get("Stream-Fencing-Token"))
    if token is None:
        raise ProtocolError(ErrorCode.INVALID_HEADER, "a fence needs Stream-Fencing-Token")
    meta = await request.app[STREAMS].fence(Fence(stream_ref(request), token))
    headers = {"Stream-Next-Offset": encode(meta.next_offset), "ETag": stream_etag(meta)}
    return web.Response(status=204, headers=headers)
