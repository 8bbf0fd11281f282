"""Peer-only headers: believed from a peer (the deployment's key, a sibling's Unix socket),
refused 403 from anyone else once a key is set."""

from __future__ import annotations

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from adapter.http.peer_headers import (
    FORWARDED,
    PEER_KEY,
    PEER_ONLY,
    carries_key,
    peer_headers_middleware,
)
from adapter.protocol.errors import ErrorCode, ProtocolError

KEY = "the deployment's shared key"


async def _served(_request: web.Request) -> web.Response:
    return web.Response(status=204)


def test_only_the_deployment_key_is_the_key() -> None:
    def carries(headers: dict[str, str], key: str = KEY) -> bool:
        return carries_key(make_mocked_request("GET", "/", headers=headers), key)

    assert carries({PEER_KEY: KEY})
    assert not carries({PEER_KEY: KEY + "x"})
    assert not carries({})
    assert not carries({PEER_KEY: ""}, key="")  # no key set: nobody carries it


@pytest.mark.parametrize("header", PEER_ONLY)
async def test_a_peer_only_header_without_the_key_is_403(header: str) -> None:
    middleware = peer_headers_middleware(KEY)
    request = make_mocked_request("POST", "/b/s", headers={header: "1"})
    with pytest.raises(ProtocolError) as refused:
        await middleware(request, _served)
    assert refused.value.code is ErrorCode.FORBIDDEN
    assert header in refused.value.message


async def test_with_the_key_or_without_one_set_they_pass() -> None:
    from_a_peer = make_mocked_request("POST", "/b/s", headers={FORWARDED: "1", PEER_KEY: KEY})
    assert (await peer_headers_middleware(KEY)(from_a_peer, _served)).status == 204
    anyone = make_mocked_request("POST", "/b/s", headers={FORWARDED: "1"})
    assert (await peer_headers_middleware("")(anyone, _served)).status == 204
