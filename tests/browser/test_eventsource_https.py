"""`EventSource` in Chromium over HTTPS, across a certificate rotation by SIGHUP.

The adapter serves a certificate of a CA made by the test. Chromium is told to accept the
adapter's keys (`--ignore-certificate-errors-spki-list`, the SHA-256 of each key's
SubjectPublicKeyInfo: the way to trust a certificate that is not in its store without
turning verification off); without it the page reads nothing. The rotated pair is made
before the browser starts, so its key is listed too. A page from another origin subscribes;
the tests append over HTTPS with a client that trusts the test CA. Which certificate a new
connection is shown after the SIGHUP is checked with Python's `ssl` (`until_presented`):
Chromium may resume its earlier TLS session on a new connection, which shows none.
"""

from __future__ import annotations

import os
import shutil
import signal
import ssl
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from urllib.parse import urlencode

import aiohttp
import pytest
import pytest_asyncio
from playwright.async_api import BrowserContext, Page, async_playwright

from devstack.browser import CHROMIUM_ARGS, chromium_path
from devstack.process import free_port
from tests.adapter_process import adapter_pid, running_adapter
from tests.browser.page_origin import serving_page
from tests.browser.test_eventsource import PAGE, WAIT_MS
from tests.certificates import Pair, TestCA, spki_sha256, until_presented

pytestmark = pytest.mark.asyncio(loop_scope="module")


@dataclass(frozen=True)
class Served:
    url: str
    port: int
    ca: TestCA
    serving: Pair  # the files the adapter reads
    rotated: Pair  # a second pair, copied over `serving` to rotate


@pytest.fixture(scope="module")
def page_port() -> int:
    return free_port()


@pytest.fixture(scope="module", params=[1, 2], ids=["one_worker", "two_workers"])
def served(
    kafka_bootstrap: str,
    tmp_path_factory: pytest.TempPathFactory,
    page_port: int,
    request: pytest.FixtureRequest,
) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("https-adapter")
    ca = TestCA(home)
    serving, rotated = ca.server("server"), ca.server("rotated")
    env = {
        "DURABLE_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "DURABLE_KAFKA_TOPIC_PREFIX": f"brtls{uuid.uuid4().hex[:10]}.",
        "DURABLE_KAFKA_COLD_DIR": str(home / "cold"),
        "DURABLE_KAFKA_CORS_ORIGINS": f"http://127.0.0.1:{page_port}",
        "DURABLE_KAFKA_TLS_CERT_FILE": str(serving.cert),
        "DURABLE_KAFKA_TLS_KEY_FILE": str(serving.key),
        "DURABLE_KAFKA_SSE_MAX_DURATION_MS": "300000",  # no reconnect of its own in the test
    }
    port = free_port()
    tls = ssl.create_default_context(cafile=str(ca.path))
    with running_adapter(env, home / "adapter.log", port, request.param, tls) as url:
        yield Served(url, port, ca, serving, rotated)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def page_origin(page_port: int) -> AsyncIterator[str]:
    async with serving_page(page_port, PAGE) as origin:
        yield origin


@pytest_asyncio.fixture(loop_scope="module")
async def browser(
    tmp_path_factory: pytest.TempPathFactory, served: Served
) -> AsyncIterator[BrowserContext]:
    """Headless Chromium accepting the adapter's two keys, and no other certificate."""
    profile = tmp_path_factory.mktemp("chromium-profile")
    keys = ",".join(spki_sha256(pair.cert) for pair in (served.serving, served.rotated))
    args = [*CHROMIUM_ARGS, f"--ignore-certificate-errors-spki-list={keys}"]
    async with async_playwright() as playwright:
        context = await playwright.chromium.launch_persistent_context(
            profile, executable_path=chromium_path(), headless=True, args=args
        )
        try:
            yield context
        finally:
            await context.close()


async def test_eventsource_reads_over_https_across_a_certificate_rotation(
    browser: BrowserContext, page_origin: str, served: Served
) -> None:
    path = f"/v1/stream/tls-{uuid.uuid4().hex[:10]}"
    stream_url = f"{served.url}{path}"
    trusting = ssl.create_default_context(cafile=str(served.ca.path))
    connector = aiohttp.TCPConnector(ssl=trusting)
    async with aiohttp.ClientSession(connector=connector, raise_for_status=True) as http:
        await _send(http, "PUT", stream_url)
        page = await _subscribed(browser, page_origin, stream_url)
        await _send(http, "POST", stream_url, "before;")
        await page.wait_for_function("window.received.join('') === 'before;'", timeout=WAIT_MS)

        for suffix in ("cert", "key"):
            shutil.copyfile(getattr(served.rotated, suffix), getattr(served.serving, suffix))
        os.kill(adapter_pid(served.port), signal.SIGHUP)
        await until_presented(served.port, trusting, served.rotated.serial)
        await _send(http, "POST", stream_url, "after;")
        both = "window.received.join('') === 'before;after;'"
        await page.wait_for_function(both, timeout=WAIT_MS)
        # The open EventSource never noticed: one connection, no error, no reconnect.
        assert await page.evaluate("[window.opens, window.errors]") == [1, 0]
        # A new page connects under the new certificate and reads the same.
        later = await _subscribed(browser, page_origin, stream_url)
        await later.wait_for_function(both, timeout=WAIT_MS)
        await _send(http, "POST", stream_url, headers={"Stream-Closed": "true"})
        for each in (page, later):
            await each.wait_for_function("window.streamClosed === true", timeout=WAIT_MS)
            assert await each.evaluate("[window.opens, window.errors]") == [1, 0]
            await each.close()


async def _subscribed(browser: BrowserContext, page_origin: str, stream_url: str) -> Page:
    """A page tailing `stream_url` by SSE from its start, once it is up to date."""
    page = await browser.new_page()
    url = f"{stream_url}?offset=-1&live=sse"
    await page.goto(f"{page_origin}/?{urlencode({'url': url, 'kind': 'text'})}")
    await page.wait_for_function(
        "window.opens === 1 && window.controls.some((c) => c.upToDate)", timeout=WAIT_MS
    )
    return page


async def _send(
    http: aiohttp.ClientSession,
    method: str,
    url: str,
    body: str | None = None,
    headers: dict[str, str] | None = None,
) -> None:
    headers = {"Content-Type": "text/plain"} | (headers or {})
    async with http.request(method, url, data=body, headers=headers) as reply:
        await reply.read()
