"""A read's `Reader` keeps the route and the reader's credential, not the request."""

from __future__ import annotations

import gc
import weakref

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from adapter.http.auth import GATE, Gate
from adapter.http.peers import PEERS, PeerClients, reader_of


def _app() -> web.Application:
    app = web.Application()
    app[PEERS] = PeerClients(10.0)
    app[GATE] = Gate(None, query_token=True)
    return app


@pytest.mark.parametrize(
    ("target", "headers"),
    [
        ("/v1/stream/s?offset=-1", {"Authorization": "Bearer t"}),
        ("/v1/stream/s?offset=-1&access_token=t", {}),  # moved to the header
    ],
)
def test_a_reader_holds_the_credential_and_no_request(target: str, headers: dict[str, str]) -> None:
    request = make_mocked_request("GET", target, headers=headers, app=_app())
    reader = reader_of(request)
    assert reader is not None
    gone = weakref.ref(request)
    del request
    gc.collect()
    assert gone() is None  # the relay may keep `reader` for a quarter of a TTL
    assert reader.__self__.credential == "Bearer t"  # type: ignore[attr-defined]
    assert reader.__self__.path == "/v1/stream/s"  # type: ignore[attr-defined]
