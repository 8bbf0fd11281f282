"""Live tails in a real browser: `EventSource` on the adapter, from another origin (§5.8).

Debian's Chromium runs headless under Playwright, which never downloads a browser here. A page
served by this module from its own port (another origin, so CORS is exercised) subscribes with
`new EventSource(url)`; the tests append over HTTP and read back what the page received. On the
control event with `streamClosed` the page closes the EventSource, as a client must, since an
EventSource would otherwise reconnect by itself when the server ends the response.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest
import pytest_asyncio
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from playwright.async_api import BrowserContext, Page, Request, Response, async_playwright

from devstack.browser import CHROMIUM_ARGS, chromium_path
from devstack.process import free_port
from tests.adapter_process import running_adapter, worker_urls
from tests.browser.page_origin import serving_page
from tests.cluster import past_moves, until_read

pytestmark = pytest.mark.asyncio(loop_scope="module")

WAIT_MS = 20_000

# `kind` (text, json or binary) tells the page how to decode: EventSource cannot read headers.
PAGE = """<!doctype html>
<meta charset="utf-8">
<title>live tail</title>
<script>
"use strict";
const params = new URLSearchParams(location.search);
const kind = params.get("kind");
const es = new EventSource(params.get("url"));
Object.assign(window, {
  received: [], controls: [], opens: 0, errors: 0, streamClosed: false, es,
});
es.onopen = () => { window.opens += 1; };
es.onerror = () => { window.errors += 1; };
es.addEventListener("data", (event) => {
  if (kind === "binary") {
    const text = atob(event.data.replace(/[\\r\\n]/g, ""));
    window.received.push(...Uint8Array.from(text, (c) => c.charCodeAt(0)));
  } else if (kind === "json") {
    window.received.push(...JSON.parse(event.data));
  } else {
    window.received.push(event.data);
  }
});
es.addEventListener("control", (event) => {
  const control = JSON.parse(event.data);
  window.controls.push(control);
  if (control.streamClosed) {
    es.close();
    window.streamClosed = true;
  }
});
</script>
"""


@pytest.fixture(scope="module")
def page_port() -> int:
    return free_port()


@pytest.fixture(scope="module", params=[1, 2], ids=["one_worker", "two_workers"])
def adapter_log(
    kafka_bootstrap: str,
    tmp_path_factory: pytest.TempPathFactory,
    page_port: int,
    request: pytest.FixtureRequest,
) -> Iterator[tuple[str, Path]]:
    """The real `durable-kafka serve` process on the test broker, with topics of its own;
    the page's origin is the one cross-origin caller it lets in. Every test runs against a
    single process and against `serve --workers 2` (a tail held by either worker)."""
    home = tmp_path_factory.mktemp("browser-adapter")
    env = {
        "DURABLE_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "DURABLE_KAFKA_TOPIC_PREFIX": f"br{uuid.uuid4().hex[:10]}.",
        "DURABLE_KAFKA_COLD_DIR": str(home / "cold"),
        "DURABLE_KAFKA_MOUNT_INDEX_DIR": str(home / "mount-index"),
        "DURABLE_KAFKA_MOUNT_TOPICS": "orders-*",
        "DURABLE_KAFKA_CORS_ORIGINS": f"http://127.0.0.1:{page_port}",
    }
    with running_adapter(env, home / "adapter.log", workers=request.param) as base_url:
        yield base_url, home / "adapter.log"


@pytest.fixture(scope="module")
def adapter_url(adapter_log: tuple[str, Path]) -> str:
    return adapter_log[0]


@pytest.fixture(scope="module")
def worker_bases(adapter_log: tuple[str, Path]) -> list[str]:
    """Each serving process's own URL: the shared one alone with one worker."""
    base_url, log = adapter_log
    return worker_urls(log) or [base_url]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def page_origin(page_port: int) -> AsyncIterator[str]:
    """A second origin that serves only the page."""
    async with serving_page(page_port, PAGE) as origin:
        yield origin


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[BrowserContext]:
    """Headless Chromium with a fresh profile, shared by the module's tests."""
    profile = tmp_path_factory.mktemp("chromium-profile")
    async with async_playwright() as playwright:
        context = await playwright.chromium.launch_persistent_context(
            profile, executable_path=chromium_path(), headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield context
        finally:
            await context.close()


@pytest_asyncio.fixture(loop_scope="module")
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(raise_for_status=True) as session:
        yield session


@dataclass
class Subscription:
    """A page tailing one stream, and what the browser's network layer saw of it."""

    page: Page
    stream_path: str
    requests: list[Request] = field(default_factory=list)
    responses: list[Response] = field(default_factory=list)

    async def value(self, expression: str) -> Any:
        return await self.page.evaluate(expression)

    async def wait_for(self, expression: str) -> None:
        await self.page.wait_for_function(expression, timeout=WAIT_MS)


Subscribe = Callable[[str, str], Awaitable[Subscription]]


async def create(http: aiohttp.ClientSession, stream_url: str, content_type: str) -> None:
    headers = {"Content-Type": content_type}
    status, body = await past_moves(http, "PUT", stream_url, headers=headers)
    assert status == 201, body


async def append(
    http: aiohttp.ClientSession, stream_url: str, content_type: str, body: bytes
) -> None:
    headers = {"Content-Type": content_type}
    status, answer = await past_moves(http, "POST", stream_url, data=body, headers=headers)
    assert status == 204, answer


async def close(http: aiohttp.ClientSession, stream_url: str) -> None:
    status, body = await past_moves(http, "POST", stream_url, headers={"Stream-Closed": "true"})
    assert status == 204, body


@pytest_asyncio.fixture(loop_scope="module")
async def subscribe(
    browser: BrowserContext, page_origin: str, adapter_url: str
) -> AsyncIterator[Subscribe]:
    """Open the page on a stream from offset -1 and wait until it is live at the tail."""
    pages: list[Page] = []

    async def open_page(stream_path: str, kind: str) -> Subscription:
        page = await browser.new_page()
        pages.append(page)
        sub = Subscription(page, stream_path)
        page.on("console", lambda message: print(f"page console: {message.text}"))

        def on_request(request: Request) -> None:
            if stream_path in request.url:
                sub.requests.append(request)

        def on_response(response: Response) -> None:
            if stream_path in response.url:
                sub.responses.append(response)

        page.on("request", on_request)
        page.on("response", on_response)
        url = f"{adapter_url}{stream_path}?offset=-1&live=sse"
        await page.goto(f"{page_origin}/?{urlencode({'url': url, 'kind': kind})}")
        await sub.wait_for("window.opens === 1 && window.controls.some((c) => c.upToDate)")
        return sub

    yield open_page
    for page in pages:
        await page.close()


async def assert_closed_without_reconnecting(sub: Subscription, page_origin: str) -> None:
    await sub.wait_for("window.streamClosed === true")
    await asyncio.sleep(1.0)  # an EventSource left open would fire `error` at once here
    assert await sub.value("window.es.readyState") == 2  # CLOSED: it never reconnects
    assert await sub.value("[window.opens, window.errors]") == [1, 0]
    assert len(sub.requests) == 1
    last = (await sub.value("window.controls"))[-1]
    assert last["streamClosed"] is True
    assert "streamCursor" not in last
    [response] = sub.responses
    assert response.status == 200
    assert response.headers["access-control-allow-origin"] == page_origin
    assert response.headers["content-type"].startswith("text/event-stream")


async def test_text_stream(
    subscribe: Subscribe, http: aiohttp.ClientSession, adapter_url: str, page_origin: str
) -> None:
    path = f"/v1/stream/browser-{uuid.uuid4().hex[:10]}/text"
    stream_url = f"{adapter_url}{path}"
    await create(http, stream_url, "text/plain")
    sub = await subscribe(path, "text")
    messages = ["hello, ", "wörld ✓\nsecond line\n", "bye"]
    for message in messages:
        await append(http, stream_url, "text/plain", message.encode())
    expected = "".join(messages)
    await sub.wait_for(f"window.received.join('') === {json.dumps(expected)}")
    await close(http, stream_url)

    await assert_closed_without_reconnecting(sub, page_origin)
    assert "".join(await sub.value("window.received")) == expected
    assert "stream-sse-data-encoding" not in sub.responses[0].headers


async def test_binary_stream_is_base64(
    subscribe: Subscribe, http: aiohttp.ClientSession, adapter_url: str, page_origin: str
) -> None:
    path = f"/v1/stream/browser-{uuid.uuid4().hex[:10]}/bytes"
    stream_url = f"{adapter_url}{path}"
    content_type = "application/octet-stream"
    await create(http, stream_url, content_type)
    sub = await subscribe(path, "binary")
    payload = bytes(range(256))
    for start in range(0, 256, 100):  # three appends: 100, 100 and 56 bytes
        await append(http, stream_url, content_type, payload[start : start + 100])
    await sub.wait_for("window.received.length >= 256")
    await close(http, stream_url)

    await assert_closed_without_reconnecting(sub, page_origin)
    assert bytes(await sub.value("window.received")) == payload
    assert sub.responses[0].headers["stream-sse-data-encoding"] == "base64"


async def test_json_stream_events_are_arrays(
    subscribe: Subscribe, http: aiohttp.ClientSession, adapter_url: str, page_origin: str
) -> None:
    path = f"/v1/stream/browser-{uuid.uuid4().hex[:10]}/json"
    stream_url = f"{adapter_url}{path}"
    content_type = "application/json"
    await create(http, stream_url, content_type)
    sub = await subscribe(path, "json")
    values: list[Any] = [{"n": 1, "text": "é"}, [2, "two"], "three", None]
    for value in values[:2]:  # one message per append (an array body is one message each)
        await append(http, stream_url, content_type, json.dumps([value]).encode())
    await append(http, stream_url, content_type, json.dumps(values[2:]).encode())
    await sub.wait_for(f"window.received.length >= {len(values)}")
    await close(http, stream_url)

    await assert_closed_without_reconnecting(sub, page_origin)
    assert await sub.value("window.received") == values
    assert "stream-sse-data-encoding" not in sub.responses[0].headers


async def _caught_up(session: aiohttp.ClientSession, bucket_url: str) -> bool:
    """Whether the mount at `bucket_url` says its index caught up (a worker that has not
    followed the mount's creation yet answers 404)."""
    async with session.get(bucket_url) as response:
        return response.status == 200 and bool((await response.json())["index"]["caught_up"])


async def test_a_mounted_key_tails_records_of_a_plain_producer(
    subscribe: Subscribe,
    http: aiohttp.ClientSession,
    adapter_url: str,
    worker_bases: list[str],
    page_origin: str,
    kafka_bootstrap: str,
) -> None:
    """An existing topic, written by a plain Kafka producer, tailed per key by `EventSource`."""
    topic = f"orders-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "compression.type": "lz4"})
    values: list[Any] = [{"order": 42, "status": "placed"}, {"order": 42, "status": "paid"}]
    producer.produce(topic, json.dumps(values[0]).encode(), b"order-42")
    producer.produce(topic, b'{"order": 7}', b"order-7")
    producer.produce(topic, json.dumps(values[1]).encode(), b"order-42")
    assert producer.flush(30) == 0
    bucket = topic
    mount = {"mount": {"topic": topic, "content_type": "application/json"}}
    async with http.put(f"{adapter_url}/{bucket}", json=mount) as response:
        assert response.status == 201
    # Every worker indexes the topic itself, and the page's connection may reach either.
    async with aiohttp.ClientSession() as plain:  # answers 404 without raising
        for base in worker_bases:
            asked = partial(_caught_up, plain, f"{base}/{bucket}")
            assert await until_read(asked, True, 20), f"{base} never caught up with {topic}"

    path = f"/{bucket}/order-42"
    sub = await subscribe(path, "json")
    await sub.wait_for("window.received.length >= 2")
    shipped = {"order": 42, "status": "shipped"}
    producer.produce(topic, json.dumps(shipped).encode(), b"order-42")
    assert producer.flush(30) == 0
    await sub.wait_for("window.received.length >= 3")

    assert await sub.value("window.received") == [*values, shipped]
    assert await sub.value("[window.opens, window.errors]") == [1, 0]
    assert len(sub.requests) == 1
    assert sub.responses[0].headers["access-control-allow-origin"] == page_origin
    await sub.page.close()  # a mounted stream never closes: the client ends the tail
