"""SSE through a reverse proxy that buffers: Debian's nginx with its defaults (which buffer a
proxied response) and with the settings docs/how-to/browsers.md gives. An event appended while
a subscriber listens reaches it through the proxy while its response is still open, and a
subscriber that reconnects from the last `streamNextOffset` it was given misses nothing and
gets nothing twice."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import aiohttp
import pytest

from tests.cache_proxy import nginx_proxy
from tests.served import ServedApp

pytestmark = pytest.mark.asyncio(loop_scope="module")

TEXT = {"Content-Type": "text/plain"}
# The `location` of docs/how-to/browsers.md, "Behind a reverse proxy".
DOCUMENTED = """
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_buffering off;
            proxy_cache off;
            proxy_read_timeout 75s;
            gzip off;
"""
# Well under the served adapter's `sse_max_duration_ms` (60 s): an event that waits in the
# proxy's buffer until the response ends is not delivered in time.
EVENT_WAIT_S = 15.0


@pytest.mark.parametrize("location", ["", DOCUMENTED], ids=["nginx-defaults", "documented"])
async def test_an_event_reaches_a_subscriber_through_the_proxy_while_it_listens(
    served_adapter: ServedApp, tmp_path: Path, location: str
) -> None:
    api = served_adapter.where
    stream = f"{api.url}/v1/stream/proxied-{uuid.uuid4().hex[:8]}"
    async with aiohttp.ClientSession() as session:
        async with session.put(stream, headers=TEXT) as made:
            assert made.status == 201
        with nginx_proxy(api.port, tmp_path / "nginx", location) as proxy:
            proxied = stream.replace(api.url, proxy)
            async with session.get(proxied, params={"offset": "-1", "live": "sse"}) as events:
                assert events.status == 200
                await _next(events, "control")  # caught up
                await _append(session, stream, "second")
                assert await _next(events, "data") == "second"
                after = json.loads(await _next(events, "control"))["streamNextOffset"]
            # Resumed from the last offset it was given: what came since, nothing twice.
            await _append(session, stream, "third")
            async with session.get(proxied, params={"offset": after, "live": "sse"}) as events:
                assert await _next(events, "data") == "third"


async def _append(session: aiohttp.ClientSession, url: str, body: str) -> None:
    async with session.post(url, data=body, headers=TEXT) as reply:
        assert reply.status in (200, 204), await reply.text()


async def _next(events: aiohttp.ClientResponse, kind: str) -> str:
    """The data of the next SSE event of `kind`, skipping others."""
    while True:
        event, data = await asyncio.wait_for(_event(events), EVENT_WAIT_S)
        if event == kind:
            return data


async def _event(events: aiohttp.ClientResponse) -> tuple[str, str]:
    event, data = "message", list[str]()
    while True:
        line = (await events.content.readline()).decode()
        if not line:
            raise AssertionError("the SSE response ended")
        line = line.rstrip("\r\n")
        if not line:
            if data:
                return event, "\n".join(data)
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            event = value
        elif field == "data":
            data.append(value)
