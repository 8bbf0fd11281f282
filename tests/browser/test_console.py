"""The web console at `/ui/` in a real browser, against a real adapter process and broker.

Headless Debian Chromium driven by Playwright (never a downloaded browser). The adapter runs
with an SSE connection lifetime of 2 s, so every live test also crosses reconnects. Numbered
comments name the checks they make. Screenshots of each view go to `artifacts/console/`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from playwright.async_api import (
    BrowserContext,
    ConsoleMessage,
    Page,
    Request,
    Response,
    async_playwright,
)

from devstack.browser import CHROMIUM_ARGS, chromium_path
from tests.adapter_process import running_adapter
from tests.tokens import token_file

pytestmark = pytest.mark.asyncio(loop_scope="module")

WAIT_MS = 30_000
SSE_LIFETIME_MS = 2_000
SIZE_BUDGET = 64 * 1024
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "console"
JSON_TYPE = "application/json"


@pytest.fixture(scope="module")
def adapter_url(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("console-adapter")
    env = {
        "DURABLE_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "DURABLE_KAFKA_TOPIC_PREFIX": f"ui{uuid.uuid4().hex[:10]}.",
        "DURABLE_KAFKA_COLD_DIR": str(home / "cold"),
        "DURABLE_KAFKA_SSE_MAX_DURATION_MS": str(SSE_LIFETIME_MS),
        "DURABLE_KAFKA_CONSOLE": "rw",
        "DURABLE_KAFKA_MOUNT_TOPICS": "ui-*",
    }
    with running_adapter(env, home / "adapter.log") as base_url:
        yield base_url


@pytest.fixture(scope="module")
def read_only_url(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An adapter whose console is read-only (`console = ro`), mounts allowed as above."""
    home = tmp_path_factory.mktemp("console-read-only")
    env = {
        "DURABLE_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "DURABLE_KAFKA_TOPIC_PREFIX": f"ro{uuid.uuid4().hex[:10]}.",
        "DURABLE_KAFKA_COLD_DIR": str(home / "cold"),
        "DURABLE_KAFKA_CONSOLE": "ro",
        "DURABLE_KAFKA_MOUNT_TOPICS": "ui-*",
    }
    with running_adapter(env, home / "adapter.log") as base_url:
        yield base_url


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[BrowserContext]:
    profile = tmp_path_factory.mktemp("console-chromium")
    async with async_playwright() as playwright:
        context = await playwright.chromium.launch_persistent_context(
            profile,
            executable_path=chromium_path(),
            headless=True,
            args=CHROMIUM_ARGS,
            accept_downloads=True,
            viewport={"width": 1280, "height": 900},
        )
        try:
            yield context
        finally:
            await context.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def bucket(http: aiohttp.ClientSession, adapter_url: str) -> str:
    bucket_id = f"ui-{uuid.uuid4().hex[:8]}"
    async with http.put(f"{adapter_url}/{bucket_id}") as response:
        assert response.status == 201, await response.text()
    return bucket_id


class Watched:
    """A page, with every console error, page error and request it made."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.errors: list[str] = []
        self.expected: list[str] = []
        self.failed: list[str] = []  # 4xx and 5xx answers, to explain a console error
        self.requests: list[Request] = []
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.errors.append(f"pageerror: {error}"))
        page.on("request", self._request)
        page.on("response", self._response)

    def _request(self, request: Request) -> None:
        self.requests.append(request)

    def _response(self, response: Response) -> None:
        if response.status >= 400:
            self.failed.append(f"{response.status} {response.request.method} {response.url}")

    def expect_error(self, part: str) -> None:
        """A console error containing `part` is what the test provokes (Chromium logs every
        4xx a fetch gets), not a failure."""
        self.expected.append(part)

    def _console(self, message: ConsoleMessage) -> None:
        if message.type in ("error", "warning") and not any(
            part in message.text for part in self.expected
        ):
            self.errors.append(f"{message.type}: {message.text}")

    async def wait_for(self, function: str, arg: Any = None) -> None:
        """Poll a JS function (never a bare expression: the page's CSP forbids eval)."""
        await self.page.wait_for_function(function, arg=arg, timeout=WAIT_MS)

    async def shot(self, name: str, full_page: bool = True) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        await self.page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=full_page)


@pytest_asyncio.fixture(loop_scope="module")
async def watched(browser: BrowserContext) -> AsyncIterator[Watched]:
    page = await browser.new_page()
    watched = Watched(page)
    yield watched
    await page.close()
    assert watched.errors == [], watched.failed


async def create_stream(
    http: aiohttp.ClientSession, url: str, content_type: str = "application/json"
) -> None:
    async with http.put(url, headers={"Content-Type": content_type}) as response:
        assert response.status == 201, await response.text()


async def append(
    http: aiohttp.ClientSession, url: str, body: bytes, content_type: str = "application/json"
) -> None:
    async with http.post(url, data=body, headers={"Content-Type": content_type}) as response:
        assert response.status in (200, 204), await response.text()


async def tail_offset(http: aiohttp.ClientSession, url: str) -> str:
    async with http.head(url) as response:
        assert response.status == 200
        return response.headers["Stream-Next-Offset"]


async def open_stream(watched: Watched, adapter_url: str, bucket: str, stream: str) -> None:
    """The stream's view, live and caught up with the tail."""
    await watched.page.goto(f"{adapter_url}/ui/#/s/{bucket}/{stream}")
    await watched.wait_for("() => window.consoleLive && window.consoleLive.upToDate")


@dataclass(frozen=True)
class Made:
    id: str
    url: str


@dataclass(frozen=True)
class Stage:
    """Where most checks start: a page, a client, the adapter and its bucket."""

    watched: Watched
    http: aiohttp.ClientSession
    base: str
    bucket: str

    @property
    def page(self) -> Page:
        return self.watched.page

    async def stream(
        self, name: str, *bodies: bytes, content_type: str = JSON_TYPE, view: bool = True
    ) -> Made:
        """A new stream `name-…` of `content_type` holding `bodies` (one append each), its
        view opened and caught up unless `view` is False."""
        stream = f"{name}-{uuid.uuid4().hex[:6]}"
        made = Made(stream, f"{self.base}/{self.bucket}/{stream}")
        await create_stream(self.http, made.url, content_type)
        for body in bodies:
            await append(self.http, made.url, body, content_type)
        if view:
            await open_stream(self.watched, self.base, self.bucket, made.id)
        return made


@pytest_asyncio.fixture(loop_scope="module")
async def stage(
    watched: Watched, http: aiohttp.ClientSession, adapter_url: str, bucket: str
) -> Stage:
    return Stage(watched, http, adapter_url, bucket)


def numbered(*ns: int | str) -> list[bytes]:
    return [json.dumps({"n": n}).encode() for n in ns]


async def json_rows(page: Page) -> list[Any]:
    texts = await page.locator("#messages pre.msg").all_text_contents()
    return [json.loads(text) for text in texts]


async def wait_rows(watched: Watched, count: int) -> None:
    await watched.wait_for(
        "(n) => document.querySelectorAll('#messages tr').length === n"
        " && !document.querySelector('#new-count:not([hidden])')",
        count,
    )


async def test_loads_same_origin_within_budget_and_csp(
    watched: Watched, adapter_url: str, bucket: str, http: aiohttp.ClientSession
) -> None:
    """1. `/ui/` loads with no request elsewhere, no console error or CSP report, in budget."""
    page = watched.page
    response = await page.goto(f"{adapter_url}/ui/")
    assert response is not None
    assert response.status == 200
    assert response.headers["content-security-policy"].startswith("default-src 'self'")
    await page.get_by_role("link", name=bucket).wait_for()  # every module and the API answered
    assert {r.url.split("/")[2] for r in watched.requests} == {adapter_url.split("/")[2]}
    static = [r for r in watched.requests if "/ui/api/" not in r.url]
    sizes = []
    for request in static:
        sent = await request.response()
        assert sent is not None, request.url
        assert sent.status == 200, request.url
        sizes.append(len(await sent.body()))
    total = sum(sizes)
    print(f"console static files: {len(static)} requests, {total} bytes")
    assert total <= SIZE_BUDGET
    await watched.shot("1-buckets")


async def test_burst_of_1000_in_order_once(stage: Stage) -> None:
    """4. A burst of 1,000 appends shows 1..1000 exactly once, in order."""
    made = await stage.stream("burst")
    for body in numbered(*range(1, 1001)):
        await append(stage.http, made.url, body)
    await wait_rows(stage.watched, 1000)
    assert [row["n"] for row in await json_rows(stage.page)] == list(range(1, 1001))
    await stage.watched.shot("4-stream-json", full_page=False)


async def test_reconnects_leave_no_gap_or_duplicate(stage: Stage) -> None:
    """5. With SSE connections ending every 2 s, ten reconnects: no gap, no duplicate."""
    made = await stage.stream("resume")
    first = await stage.page.evaluate("window.consoleLive.connections")
    n = 0
    while await stage.page.evaluate("window.consoleLive.connections") < first + 10:
        n += 1
        await append(stage.http, made.url, numbered(n)[0])
        await asyncio.sleep(0.1)
    await wait_rows(stage.watched, n)
    assert [row["n"] for row in await json_rows(stage.page)] == list(range(1, n + 1))


async def test_closed_elsewhere_stops_and_disables_append(stage: Stage) -> None:
    """6. Closed by another client: "Closed" badge, append disabled, no further requests."""
    watched, http = stage.watched, stage.http
    made = await stage.stream("closing", b'{"before":"close"}')
    async with http.post(made.url, headers={"Stream-Closed": "true"}) as response:
        assert response.status in (200, 204)
    await watched.wait_for(
        "() => document.getElementById('stream-status')?.textContent === 'Closed'"
    )
    assert await watched.page.locator("#append-send").is_disabled()
    assert await watched.page.locator("#live").is_disabled()
    seen = len(watched.requests)
    await asyncio.sleep(SSE_LIFETIME_MS / 1000 * 2)  # past when a live reader would reconnect
    assert watched.requests[seen:] == []
    await watched.shot("6-stream-closed")


async def test_json_array_keeps_big_numbers_and_refuses_malformed(stage: Stage) -> None:
    """8. A JSON array appends two rows, the big number exact; malformed JSON changes nothing."""
    watched, http, page = stage.watched, stage.http, stage.page
    url = (await stage.stream("append")).url
    await page.get_by_label("A JSON array of messages").check()
    await page.locator("#append-text").fill('[{"n":12345678901234567890},{"a":1}]')
    await page.locator("#append-text").press("Control+Enter")
    await wait_rows(watched, 2)
    texts = await page.locator("#messages pre.msg").all_text_contents()
    assert "12345678901234567890" in texts[0]
    assert '"a": 1' in texts[1]
    async with http.get(url) as response:
        assert await response.text() == '[{"n":12345678901234567890},{"a":1}]'
    before = await tail_offset(http, url)

    await page.locator("#append-text").fill('[{"n":1},')
    await page.locator("#append-send").click()
    await watched.wait_for(
        "() => document.getElementById('append-note')?.textContent.includes('JSON')"
    )
    assert "invalid JSON" in (await page.locator("#append-note").text_content() or "")
    assert await tail_offset(http, url) == before
    assert len(await json_rows(page)) == 2
    await watched.shot("8-append")


async def test_binary_hex_and_download(stage: Stage, tmp_path: Path) -> None:
    """9. Bytes 0x00-0xFF show in hex and ASCII, and the download has the same SHA-256."""
    watched, http = stage.watched, stage.http
    payload = bytes(range(256))
    binary = "application/octet-stream"
    url = (await stage.stream("bytes", b"\x00\x01", payload, content_type=binary)).url
    await wait_rows(watched, 2)  # one read, two messages: a row each
    dumps = await watched.page.locator("#messages pre.binary").all_text_contents()
    assert dumps == [hexdump(b"\x00\x01"), hexdump(payload)]
    await append(http, url, b"\xff", "application/octet-stream")  # and live
    await wait_rows(watched, 3)
    assert await watched.page.locator("#messages pre.binary").nth(2).text_content() == hexdump(
        b"\xff"
    )
    async with watched.page.expect_download() as info:
        await watched.page.get_by_role("button", name="Download (256 bytes)").click()
    saved = tmp_path / "download.bin"
    await (await info.value).save_as(saved)
    assert hashlib.sha256(saved.read_bytes()).hexdigest() == hashlib.sha256(payload).hexdigest()
    await watched.shot("9-stream-binary")


def hexdump(data: bytes) -> str:
    lines = []
    for at in range(0, len(data), 16):
        row = data[at : at + 16]
        hexes = " ".join(f"{b:02x}" for b in row)
        ascii_ = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in row)
        lines.append(f"{at:08x}  {hexes:<47}  |{ascii_}|")
    return "\n".join(lines)


async def test_markup_is_text_and_runs_nothing(stage: Stage) -> None:
    """10. An `<img onerror>` payload renders as text and runs nothing."""
    watched = stage.watched
    payload = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'
    for content_type in ("text/plain", JSON_TYPE):
        body = json.dumps(payload) if content_type == JSON_TYPE else payload
        await stage.stream("xss", body.encode(), content_type=content_type)
        await watched.wait_for(
            "() => document.getElementById('messages')?.textContent.includes('onerror')"
        )
        shown = await watched.page.locator("#messages").text_content() or ""
        assert body in shown
        assert await watched.page.locator("#messages img, #messages script").count() == 0
        await asyncio.sleep(0.5)
        assert await watched.page.evaluate("window.pwned") is None
    await watched.shot("10-stream-text")


async def test_append_latency_is_reported(stage: Stage) -> None:
    """3. An append from a Python client appears in the view: p50/p95 over 50, reported only."""
    made = await stage.stream("latency")
    seconds = []
    for n, body in enumerate(numbered(*range(1, 51)), start=1):
        started = time.perf_counter()
        await append(stage.http, made.url, body)
        await wait_rows(stage.watched, n)
        seconds.append(time.perf_counter() - started)
    cuts = statistics.quantiles(seconds, n=20)
    print(f"append to row shown: p50 {cuts[9] * 1000:.0f} ms, p95 {cuts[18] * 1000:.0f} ms")
    assert [row["n"] for row in await json_rows(stage.page)] == list(range(1, 51))


async def test_deep_link_offset_survives_reload_and_bad_offset_is_shown(stage: Stage) -> None:
    """7. A deep link with an offset reproduces the view after reload; a bad one shows the 400."""
    watched, http, page = stage.watched, stage.http, stage.page
    made = await stage.stream("deep", *numbered(1, 2), view=False)
    after_two = await tail_offset(http, made.url)
    for body in numbered(3, 4, 5):
        await append(http, made.url, body)
    await page.goto(f"{stage.base}/ui/#/s/{stage.bucket}/{made.id}?from={after_two}")
    await wait_rows(watched, 3)
    assert [row["n"] for row in await json_rows(page)] == [3, 4, 5]
    assert await page.locator("#start-offset").input_value() == after_two
    await page.reload()
    await wait_rows(watched, 3)
    assert [row["n"] for row in await json_rows(page)] == [3, 4, 5]
    await watched.shot("7-stream-from-offset")

    watched.expect_error("status of 400")
    await page.locator("#start-offset").fill("not-an-offset")
    await page.locator("#start-offset").press("Enter")
    await watched.wait_for(
        "() => (document.getElementById('start-note')?.textContent ?? '') !== ''"
    )
    shown = await page.locator("#start-note").text_content() or ""
    assert shown.startswith("400 invalid_offset")
    assert await page.locator("#messages tr").count() == 0


async def test_prefix_paging_next_prev_back_are_exact(
    watched: Watched, adapter_url: str, bucket: str, http: aiohttp.ClientSession
) -> None:
    """2. 250 streams under a prefix: Next, Prev and Back give exact pages, the whole set."""
    prefix = f"pg{uuid.uuid4().hex[:4]}-"
    ids = sorted(f"{prefix}{i:03d}" for i in range(250))
    others = [f"{prefix[:-1]}x{i}" for i in range(3)]  # share a shorter prefix only
    for start in range(0, len(ids), 25):
        await asyncio.gather(
            *(create_stream(http, f"{adapter_url}/{bucket}/{s}") for s in ids[start : start + 25])
        )
    await asyncio.gather(*(create_stream(http, f"{adapter_url}/{bucket}/{s}") for s in others))
    pages = [ids[i : i + 40] for i in range(0, 250, 40)]
    page = watched.page

    async def shows(expected: list[str]) -> None:
        await watched.wait_for(
            "(ids) => { const got = [...document.querySelectorAll('#streams tbody th')]"
            ".map((th) => th.textContent); return JSON.stringify(got) === JSON.stringify(ids); }",
            expected,
        )

    await page.goto(f"{adapter_url}/ui/#/b/{bucket}?prefix={prefix}&limit=40")
    await shows(pages[0])
    await watched.shot("2-streams")
    seen: list[str] = list(pages[0])
    for expected in pages[1:]:
        await page.get_by_role("link", name="Next").click()
        await shows(expected)
        seen += expected
    assert await page.get_by_role("button", name="Next").is_disabled()
    assert seen == ids
    for expected in reversed(pages[:-1]):
        await page.get_by_role("link", name="Prev").click()
        await shows(expected)
    assert await page.get_by_role("button", name="Prev").is_disabled()
    for expected in pages[1:]:  # history: p1..p7, p6..p1; Back from p1 walks up again
        await page.go_back()
        await shows(expected)


async def test_delete_needs_typed_id_and_fork_shows_source_then_own(stage: Stage) -> None:
    """11. Delete needs the typed id (cancel keeps it); a fork shows the source to its offset,
    then its own appends."""
    watched, http, page = stage.watched, stage.http, stage.page
    adapter_url, bucket = stage.base, stage.bucket
    doomed_made = await stage.stream("doomed")
    doomed, doomed_url = doomed_made.id, doomed_made.url
    await page.locator("#delete-stream").click()
    confirm = page.get_by_role("dialog").get_by_role("button", name="Delete")
    assert await confirm.is_disabled()
    await page.locator("#confirm-id").fill(doomed[:-1])
    assert await confirm.is_disabled()
    await watched.shot("11-delete-dialog")
    await page.get_by_role("dialog").get_by_role("button", name="Cancel").click()
    async with http.head(doomed_url) as kept:
        assert kept.status == 200
    await page.locator("#delete-stream").click()
    await page.locator("#confirm-id").fill(doomed)
    await confirm.click()
    await page.wait_for_url(f"**/ui/#/b/{bucket}")
    async with http.head(doomed_url) as gone:
        assert gone.status == 404

    source_made = await stage.stream("source", *numbered(1, 2), view=False)
    source, source_url = source_made.id, source_made.url
    cut = await tail_offset(http, source_url)
    await append(http, source_url, b'{"n":3}')
    await open_stream(watched, adapter_url, bucket, source)
    await page.locator("#fork-stream").click()
    fork = f"{source}-fork"
    assert await page.locator("#fork-id").input_value() == fork
    await page.locator("#fork-offset").fill(cut)
    await page.get_by_role("dialog").get_by_role("button", name="Fork").click()
    await page.wait_for_url(f"**/ui/#/s/{bucket}/{fork}")
    await watched.wait_for("() => window.consoleLive && window.consoleLive.upToDate")
    await wait_rows(watched, 2)
    await append(http, f"{adapter_url}/{bucket}/{fork}", b'{"n":"own"}')
    await wait_rows(watched, 3)
    assert [row["n"] for row in await json_rows(page)] == [1, 2, "own"]
    assert f"{source} at {cut}" in (await page.locator(".facts").text_content() or "")
    await watched.shot("11-fork")


async def test_fence_then_trim_by_offset_and_by_time_with_errors_from_the_body(
    stage: Stage,
) -> None:
    """Fence: a refused token shows the server's error; a set one refuses other writers
    (412) while this tab's appends carry it. Trim: a bad offset shows the error; a trim
    before an offset removes what precedes it; a trim by a time after every message removes
    them all."""
    watched, http, page = stage.watched, stage.http, stage.page
    watched.expect_error("status of 400")
    made = await stage.stream("guarded", *numbered(1, 2, 3), view=False)
    async with http.get(made.url, params={"offset": "-1", "max_messages": "2"}) as first_two:
        cut = first_two.headers["Stream-Next-Offset"]
    await open_stream(watched, stage.base, stage.bucket, made.id)
    await wait_rows(watched, 3)

    await page.locator("#fence-token").fill("not visible")
    await page.locator("#fence-send").click()
    await shows(watched, "#fence-note", "Not fenced: 400 invalid_header: ")
    await page.locator("#fence-token").fill("writer-2")
    await page.locator("#fence-send").click()
    await shows(watched, "#fence-note", "Fenced")
    headers = {"Content-Type": JSON_TYPE}
    async with http.post(made.url, data=b'{"n":0}', headers=headers) as other:
        assert other.status == 412
        assert (await other.json())["error"]["code"] == "fencing_token_mismatch"
    await page.locator("#append-text").fill('{"n":4}')
    await page.locator("#append-send").click()
    await wait_rows(watched, 4)

    dialog = page.get_by_role("dialog")
    await page.locator("#trim-before").fill("garbage")
    await page.locator("#trim-send").click()
    await dialog.get_by_role("button", name="Trim").click()
    await shows(watched, "#trim-note", "Not trimmed: 400 invalid_")
    await page.locator("#trim-before").fill(cut)
    await page.locator("#trim-send").click()
    await watched.shot("trim-dialog")
    await dialog.get_by_role("button", name="Trim").click()
    await shows(watched, "#trim-note", f"Trimmed: the stream now begins at {cut}.")
    async with http.get(made.url, params={"offset": cut}) as kept:
        assert json.loads(await kept.read()) == [{"n": 3}, {"n": 4}]
    async with http.get(made.url, params={"offset": "-1"}) as gone:
        assert (gone.status, gone.headers["Stream-Earliest-Offset"]) == (410, cut)
    await page.locator("#trim-before").fill("")
    await page.locator("#trim-at").fill("2099-01-01T00:00:00")
    await page.locator("#trim-send").click()
    await dialog.get_by_role("button", name="Trim").click()
    tail = await tail_offset(http, made.url)
    await shows(watched, "#trim-note", f"Trimmed: the stream now begins at {tail}.")
    await watched.shot("trimmed")


async def shows(watched: Watched, selector: str, text: str) -> None:
    """Wait until the element's text holds `text`."""
    await watched.wait_for(
        "([selector, text]) => document.querySelector(selector).textContent.includes(text)",
        [selector, text],
    )


async def test_keyboard_only_walk(stage: Stage) -> None:
    """12. Keyboard only: bucket, stream, live off and on, append, jump to an offset."""
    watched, http, page, bucket = stage.watched, stage.http, stage.page, stage.bucket
    made = await stage.stream("keys", b'{"n":1}', view=False)
    stream, url = made.id, made.url
    await page.goto(f"{stage.base}/ui/")
    await page.get_by_role("link", name=bucket).wait_for()

    async def tab_to(name: str) -> None:
        for _ in range(400):
            await page.keyboard.press("Tab")
            if await page.evaluate("() => document.activeElement.textContent") == name:
                return
        raise AssertionError(f"Tab never reached {name!r}")

    await tab_to(bucket)
    await page.keyboard.press("Enter")
    await page.get_by_role("link", name=stream).wait_for()
    await tab_to(stream)
    await page.keyboard.press("Enter")
    await watched.wait_for("() => window.consoleLive && window.consoleLive.upToDate")
    await wait_rows(watched, 1)
    live = page.locator("#live")
    await page.keyboard.press("l")
    assert await live.get_attribute("aria-pressed") == "false"
    await page.keyboard.press("l")
    assert await live.get_attribute("aria-pressed") == "true"
    await watched.wait_for("() => window.consoleLive && window.consoleLive.upToDate")
    await page.keyboard.press("a")
    await page.keyboard.type('{"n":2}')
    await page.keyboard.press("Control+Enter")
    await wait_rows(watched, 2)
    at_two = await tail_offset(http, url)
    for _ in range(10):  # out of the text box: shortcuts never fire inside inputs
        await page.keyboard.press("Tab")
        if await page.evaluate("() => document.activeElement.tagName") == "BUTTON":
            break
    # The view at the offset starts a reader of its own: forget the one before, whose
    # `upToDate` would otherwise pass the wait below while the old rows are still shown.
    await page.evaluate("() => { window.consoleLive = null; }")
    await page.keyboard.press("o")
    await page.keyboard.type(at_two)
    await page.keyboard.press("Enter")
    await page.wait_for_url(f"**?from={at_two}")
    await watched.wait_for("() => window.consoleLive && window.consoleLive.upToDate")
    await page.keyboard.press("Shift+Tab")  # the shortcuts stay out of inputs: this typed no "l"
    assert await page.locator("#messages tr").count() == 0
    await watched.shot("12-keyboard")


async def test_seek_last_n_and_time_and_kafka_coordinates(stage: Stage) -> None:
    """Start from the last N messages or from a time; show each message's Kafka record."""
    watched, page = stage.watched, stage.page
    made = await stage.stream("seek", *numbered(1, 2, 3, 4, 5), view=False)
    await asyncio.sleep(0.05)  # Kafka timestamps are milliseconds: make the moment distinct
    moment = datetime.now(UTC)
    await asyncio.sleep(0.05)
    for body in numbered(6, 7, 8):
        await append(stage.http, made.url, body)
    await open_stream(watched, stage.base, stage.bucket, made.id)
    await page.locator("#start-from").select_option("last")
    await page.locator("#start-last").fill("2")
    await page.locator("#start-last").press("Enter")
    await page.wait_for_url("**?from=*")
    await wait_rows(watched, 2)
    assert [row["n"] for row in await json_rows(page)] == [7, 8]

    await page.locator("#start-from").select_option("time")
    await page.locator("#start-time").fill(moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3])
    await page.get_by_role("button", name="Go").click()
    await wait_rows(watched, 3)
    assert [row["n"] for row in await json_rows(page)] == [6, 7, 8]

    await page.locator("summary").click()
    await page.locator("#show-coordinates").click()
    await watched.wait_for("() => document.querySelectorAll('#coordinates tbody tr').length === 3")
    cells = await page.locator("#coordinates tbody tr td:nth-child(5)").all_text_contents()
    assert cells == [made.id] * 3
    await watched.shot("stream-seek-coordinates")


async def test_pause_bounded_buffer_large_message_and_export(stage: Stage, tmp_path: Path) -> None:
    """Pause counts "N new"; the view keeps 5,000 messages with a notice; a message over
    64 KiB is a preview with a download; the export is what is loaded, as NDJSON."""
    watched, http, page = stage.watched, stage.http, stage.page
    url = (await stage.stream("bounded")).url
    await page.locator("#pause").click()
    await append(http, url, b'[{"n":1},{"n":2},{"n":3}]')
    await watched.wait_for("() => document.getElementById('new-count')?.textContent === '3 new'")
    assert await page.locator("#messages tr").count() == 0
    await page.locator("#pause").click()
    await wait_rows(watched, 3)

    for start in range(4, 5404, 600):  # 5,400 messages in 9 appends of 600
        batch = ",".join(f'{{"n":{n}}}' for n in range(start, start + 600))
        await append(http, url, f"[{batch}]".encode())
    await wait_rows(watched, 5000)
    first = (await json_rows(page))[0]
    assert first == {"n": 404}  # 5,403 arrived: the oldest 403 were dropped
    notice = await page.locator("#dropped").text_content() or ""
    assert notice.startswith("403 older messages were dropped")

    big = {"text": "x" * (100 * 1024)}
    await append(http, url, json.dumps(big).encode())
    await watched.wait_for(
        "() => document.querySelector('#messages tr:last-child .note')?.textContent"
        " === 'Preview of 102412 bytes'"
    )
    async with page.expect_download() as info:
        await page.get_by_role("button", name="Download (102412 bytes)").click()
    saved = tmp_path / "big.json"
    await (await info.value).save_as(saved)
    assert json.loads(saved.read_bytes()) == big

    async with page.expect_download() as info:
        await page.locator("#export").click()
    exported = tmp_path / "export.ndjson"
    await (await info.value).save_as(exported)
    lines = exported.read_text().splitlines()
    assert len(lines) == 5000
    assert [json.loads(line) for line in lines[:2]] == [{"n": 405}, {"n": 406}]
    assert json.loads(lines[-1]) == big
    await watched.shot("stream-bounded", full_page=False)  # 5,000 rows: too tall to render


async def test_snapshot_download_and_bootstrap_then_live(stage: Stage, tmp_path: Path) -> None:
    """The latest snapshot: shown with its offset, downloaded as published, then "bootstrap,
    then go live" from it."""
    watched, http, page = stage.watched, stage.http, stage.page
    made = await stage.stream("snap", *numbered(1, 2), view=False)
    url = made.url
    cut = await tail_offset(http, url)
    headers = {"Content-Type": JSON_TYPE}
    async with http.put(f"{url}/snapshot/{cut}", data=b'{"sum":3}', headers=headers) as put:
        assert put.status == 204, await put.text()
    await append(http, url, b'{"n":3}')
    await open_stream(watched, stage.base, stage.bucket, made.id)
    await wait_rows(watched, 1)
    assert await json_rows(page) == [{"n": 3}]
    assert "folded into a snapshot" in (await page.locator("#start-note").text_content() or "")
    await page.locator("#snapshot").click()
    await page.locator("#bootstrap").wait_for()
    assert f"Snapshot at {cut}: 9 bytes" in (
        await page.locator("#snapshot-note").text_content() or ""
    )
    async with page.expect_download() as info:
        await page.get_by_role("button", name="Download", exact=True).click()
    saved = tmp_path / "snapshot.json"
    await (await info.value).save_as(saved)
    assert saved.read_bytes() == b'{"sum":3}'
    assert (await info.value).suggested_filename == f"{made.id}-snapshot-{cut}"
    await page.locator("#bootstrap").click()
    await watched.wait_for("() => window.consoleLive && window.consoleLive.upToDate")
    await wait_rows(watched, 2)
    assert await json_rows(page) == [{"sum": 3}, {"n": 3}]
    await append(http, url, b'{"n":4}')
    await wait_rows(watched, 3)
    assert (await json_rows(page))[-1] == {"n": 4}
    await watched.shot("stream-snapshot")


async def test_read_only_console_hides_every_write(
    browser: BrowserContext, read_only_url: str, http: aiohttp.ClientSession
) -> None:
    """`console = ro`: no create, delete, append, close or fork anywhere."""
    base = read_only_url
    bucket = f"ro-{uuid.uuid4().hex[:8]}"
    async with http.put(f"{base}/{bucket}") as response:
        assert response.status == 201
    await create_stream(http, f"{base}/{bucket}/watched")
    watched = Watched(await browser.new_page())
    page = watched.page
    await page.goto(f"{base}/ui/")
    await page.get_by_role("link", name=bucket).wait_for()
    assert await page.locator("#mode").text_content() == "read-only"
    assert await page.locator("form, button.danger").count() == 0
    await page.get_by_role("link", name=bucket).click()
    await page.get_by_role("link", name="watched").wait_for()
    assert await page.get_by_text("Create a stream").count() == 0
    await page.get_by_role("link", name="watched").click()
    await watched.wait_for("() => window.consoleLive && window.consoleLive.upToDate")
    for write in ("#append", "#close-stream", "#delete-stream", "#fork-stream", "#fence", "#trim"):
        assert await page.locator(write).count() == 0, write
    assert await page.locator("#snapshot").count() == 1  # reading stays
    await watched.shot("stream-read-only")
    await page.close()
    assert watched.errors == [], watched.failed


async def test_create_bucket_and_stream_and_refused_bucket_delete(
    watched: Watched, adapter_url: str, http: aiohttp.ClientSession
) -> None:
    """Buckets: the id checked as typed, created; a stream created with its content type and
    TTL; deleting the bucket while it holds a stream shows the 409 beside it."""
    page = watched.page
    await page.goto(f"{adapter_url}/ui/")
    field = page.get_by_label("Bucket id")
    await field.fill("Bad Id")
    hint = page.locator("#new-bucket-note")
    assert await hint.text_content() == "Use 4 to 64 of a-z, 0-9, _ and -"
    assert "error" in (await hint.get_attribute("class") or "")
    bucket = f"made-{uuid.uuid4().hex[:8]}"
    await field.fill(bucket)
    await page.get_by_role("button", name="Create").click()
    await page.wait_for_url(f"**/ui/#/b/{bucket}")

    await page.get_by_label("Stream id", exact=True).fill("notes")
    await page.get_by_label("Content type").fill("text/plain")
    await page.get_by_label("TTL (seconds, optional)").fill("3600")
    await page.get_by_role("button", name="Create").click()
    await page.wait_for_url(f"**/ui/#/s/{bucket}/notes")
    async with http.head(f"{adapter_url}/{bucket}/notes") as head:
        assert head.headers["Content-Type"].startswith("text/plain")
        assert head.headers["Stream-TTL"] == "3600"

    watched.expect_error("status of 409")
    await page.goto(f"{adapter_url}/ui/#/")
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name=bucket))
    await row.get_by_role("button", name="Delete").click()
    await page.get_by_role("dialog").get_by_role("button", name="Delete").click()
    await row.get_by_text("Not empty").wait_for()
    async with http.get(f"{adapter_url}/{bucket}") as kept:
        assert kept.status == 200
    await watched.shot("buckets-delete-refused")


async def test_text_rows_are_messages_even_in_one_read(stage: Stage) -> None:
    """Text shows one row per message, also when one read returns several (multi-byte text is
    cut at the messages' byte sizes)."""
    text = "text/plain"
    made = await stage.stream("text", "héllo ".encode(), "wörld\n".encode(), content_type=text)
    await wait_rows(stage.watched, 2)  # one read, two messages: a row each
    shown = stage.page.locator("#messages pre.msg")
    assert await shown.all_text_contents() == ["héllo ", "wörld\n"]
    await append(stage.http, made.url, b"and live", text)
    await wait_rows(stage.watched, 3)
    assert await shown.nth(2).text_content() == "and live"
    await stage.watched.shot("stream-text-rows")


READER = "reader-console-token-0123456789"
ADMIN = "admin-console-token-0123456789"
TENANT = "tenant-console-token-0123456789"


async def test_under_auth_the_console_asks_for_a_token_and_keeps_to_its_scopes(
    browser: BrowserContext,
    kafka_bootstrap: str,
    tmp_path: Path,
    http: aiohttp.ClientSession,
) -> None:
    """`auth_mode = static`: without a token the console asks for one; a read-only token
    browses and tails, but its append shows the 403 and is disabled; an admin token does
    everything; one that may read only its bucket opens it by id. The token goes in a header,
    never in a URL."""
    scopes = {
        "reader": (READER, ["read:*"]),
        "admin": (ADMIN, ["admin:*", "append:*", "read:*"]),
        "tenant": (TENANT, ["read:au-*"]),
    }
    env = {
        "DURABLE_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "DURABLE_KAFKA_TOPIC_PREFIX": f"au{uuid.uuid4().hex[:10]}.",
        "DURABLE_KAFKA_COLD_DIR": str(tmp_path / "cold"),
        "DURABLE_KAFKA_AUTH_MODE": "static",
        "DURABLE_KAFKA_AUTH_TOKEN_FILE": str(token_file(tmp_path / "tokens.toml", scopes)),
    }
    admin = {"Authorization": f"Bearer {ADMIN}"}
    with running_adapter(env, tmp_path / "adapter.log") as base:
        bucket = f"au-{uuid.uuid4().hex[:8]}"
        url = f"{base}/{bucket}/watched"
        async with http.put(f"{base}/{bucket}", headers=admin) as response:
            assert response.status == 201
        async with http.put(url, headers=admin | {"Content-Type": JSON_TYPE}) as response:
            assert response.status == 201
        async with http.post(url, data=b'{"n":1}', headers=admin | {"Content-Type": JSON_TYPE}):
            pass
        watched = Watched(await browser.new_page())
        watched.expect_error("status of 401")
        watched.expect_error("status of 403")
        page = watched.page
        await page.goto(f"{base}/ui/")
        await sign_in(page, READER)
        await page.get_by_role("link", name=bucket).click()
        await page.get_by_role("link", name="watched").click()
        await watched.wait_for("() => window.consoleLive && window.consoleLive.upToDate")
        await wait_rows(watched, 1)
        async with http.post(url, data=b'{"n":2}', headers=admin | {"Content-Type": JSON_TYPE}):
            pass
        await wait_rows(watched, 2)  # the live tail carries the token too

        await page.locator("#append-text").fill('{"n":"refused"}')
        await page.locator("#append-send").click()
        await watched.wait_for(
            "() => document.getElementById('append-note')?.textContent.includes('403')"
        )
        refusal = await page.locator("#append-note").text_content() or ""
        assert f"append:{bucket}" in refusal
        assert await page.locator("#append-send").is_disabled()
        await watched.shot("auth-read-only")
        assert all(READER not in request.url for request in watched.requests)
        live = [request for request in watched.requests if "live=sse" in request.url]
        assert live
        for request in live:
            assert (await request.all_headers())["authorization"] == f"Bearer {READER}"

        await page.locator("#sign-in").click()
        await sign_in(page, ADMIN)
        await watched.wait_for("() => window.consoleLive && window.consoleLive.upToDate")
        await wait_rows(watched, 2)
        await page.locator("#append-text").fill('{"n":3}')
        await page.locator("#append-text").press("Control+Enter")
        await wait_rows(watched, 3)
        await page.locator("#fork-stream").click()
        await page.get_by_role("dialog").get_by_role("button", name="Fork").click()
        await page.wait_for_url(f"**/ui/#/s/{bucket}/watched-fork")
        await wait_rows(watched, 3)
        assert [row["n"] for row in await json_rows(page)] == [1, 2, 3]
        assert await page.evaluate("() => sessionStorage.getItem('console.token')") == ADMIN

        await page.goto(f"{base}/ui/")
        await page.locator("#sign-in").click()
        await sign_in(page, TENANT)
        await page.get_by_text("This token may not list buckets").wait_for()
        await page.get_by_label("Open bucket").fill(bucket)
        await page.get_by_label("Open bucket").press("Enter")
        await page.get_by_role("link", name="watched-fork").wait_for()
        await watched.shot("auth-scoped-open-bucket")
        await page.close()
        assert watched.errors == [], watched.failed


async def sign_in(page: Page, token: str) -> None:
    """Answer the console's sign-in dialog (Enter in the field submits it)."""
    field = page.get_by_role("dialog").get_by_label("Bearer token")
    await field.fill(token)
    await field.press("Enter")
    await page.get_by_role("dialog").wait_for(state="detached")


def _fill_topic(bootstrap: str, topic: str) -> None:
    """A topic as a plain producer writes it: two values for `k-1`, one for the key `a/b`."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
    produce(bootstrap, topic, [(b"k-1", b"alpha"), (b"k-1", b"beta"), (b"a/b", b"slash")])


def produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for key, value in records:
        producer.produce(topic, value, key)
    assert producer.flush(30) == 0


async def mount(stage: Stage, topic: str, appends: bool) -> str:
    """A bucket mounting `topic` as text, once its key index has caught up."""
    bucket = f"mnt-{uuid.uuid4().hex[:8]}"
    body = {"mount": {"topic": topic, "content_type": "text/plain", "appends": appends}}
    headers = {"Content-Type": JSON_TYPE}
    async with stage.http.put(f"{stage.base}/{bucket}", json=body, headers=headers) as response:
        assert response.status == 201, await response.text()
    for _ in range(600):
        async with stage.http.get(f"{stage.base}/{bucket}") as response:
            if (await response.json()).get("index", {}).get("caught_up"):
                return bucket
        await asyncio.sleep(0.05)
    raise AssertionError(f"mount {bucket} never caught up")


async def test_a_mounted_topic_shows_its_keys_and_no_stream_actions(
    stage: Stage, kafka_bootstrap: str
) -> None:
    """A mounted topic filled by a plain producer: a badge with the topic, its record keys as
    streams, one row per value, live; no fork, close, delete, snapshot, or append unless the
    mount takes appends."""
    watched, page = stage.watched, stage.page
    topic = f"ui-orders-{uuid.uuid4().hex[:8]}"
    await asyncio.to_thread(_fill_topic, kafka_bootstrap, topic)
    bucket = await mount(stage, topic, appends=False)
    await page.goto(f"{stage.base}/ui/")
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name=bucket))
    assert await row.locator(".badge.mount").text_content() == f"topic {topic}"
    assert await row.get_by_role("button", name="Unmount").count() == 1
    await watched.shot("buckets-mounted")
    await row.get_by_role("link", name=bucket).click()
    await page.get_by_role("link", name="k-1").wait_for()
    ids = await page.locator("#streams tbody th").all_text_contents()
    assert ids == ["k-1", "~YS9i"]  # the key a/b is no stream id: ~ and its base64url
    assert "utf8" in (await page.locator("#mount-note").text_content() or "")
    assert await page.get_by_text("Create a stream").count() == 0
    await page.get_by_role("link", name="k-1").click()
    await watched.wait_for("() => window.consoleLive && window.consoleLive.upToDate")
    await wait_rows(watched, 2)
    shown = page.locator("#messages pre.msg")
    assert await shown.all_text_contents() == ["alpha", "beta"]
    for action in ("#append", "#fork-stream", "#close-stream", "#delete-stream", "#snapshot"):
        assert await page.locator(action).count() == 0, action
    for action in ("#fence", "#trim"):
        assert await page.locator(action).count() == 0, action
    assert "Mounted topic" in (await page.locator(".facts").text_content() or "")
    assert await page.locator("#start-last, #start-time, #show-coordinates").count() == 0
    await asyncio.to_thread(produce, kafka_bootstrap, topic, [(b"k-1", b"gamma")])
    await wait_rows(watched, 3)
    assert await shown.nth(2).text_content() == "gamma"
    await watched.shot("stream-mounted")

    writable = await mount(stage, topic, appends=True)
    await open_stream(watched, stage.base, writable, "k-1")
    await wait_rows(watched, 3)
    assert await page.locator("#fork-stream, #close-stream, #delete-stream").count() == 0
    await page.locator("#append-text").fill("delta")
    await page.locator("#append-send").click()
    await wait_rows(watched, 4)
    assert await shown.all_text_contents() == ["alpha", "beta", "gamma", "delta"]


# Text a view must never show: what JavaScript prints for a missing value. Message content
# (`pre.msg`) is the user's own and may say anything.
STRAY_TEXT = """() => {
  const words = /\\b(null|undefined|NaN)\\b|\\[object /;
  const found = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!node.parentElement.closest("pre.msg") && words.test(node.textContent)) {
      found.push(`${node.parentElement.tagName}: ${node.textContent.trim()}`);
    }
  }
  for (const element of document.body.querySelectorAll("*")) {
    for (const attribute of element.attributes) {
      const text = `${element.tagName} ${attribute.name}=${attribute.value}`;
      if (words.test(attribute.value)) found.push(text);
    }
  }
  return found;
}"""


@dataclass(frozen=True)
class Views:
    """What a console shows: a bucket's streams, and mounted buckets with the keys to open."""

    bucket: str
    streams: tuple[str, ...]
    mounts: tuple[str, ...]
    keys: tuple[str, ...] = ("k-1", "~YS9i")


async def _views(http: aiohttp.ClientSession, base: str, kafka_bootstrap: str) -> Views:
    """A JSON stream of one read of two messages, its fork, a text stream, and a topic mounted
    read-only and writable."""
    tag = uuid.uuid4().hex[:8]
    bucket = f"walk-{tag}"
    async with http.put(f"{base}/{bucket}") as response:
        assert response.status == 201, await response.text()
    await create_stream(http, f"{base}/{bucket}/json")
    await append(http, f"{base}/{bucket}/json", b'[{"n":1},{"n":2}]')
    fork = {"Stream-Forked-From": f"/{bucket}/json", "Content-Type": JSON_TYPE}
    async with http.put(f"{base}/{bucket}/json-fork", headers=fork) as response:
        assert response.status == 201, await response.text()
    await create_stream(http, f"{base}/{bucket}/text", "text/plain")
    for body in (b"one", b"two"):
        await append(http, f"{base}/{bucket}/text", body, "text/plain")
    topic = f"ui-walk-{tag}"
    await asyncio.to_thread(_fill_topic, kafka_bootstrap, topic)
    mounts = []
    for appends in (False, True):
        mounted = f"mnt-{uuid.uuid4().hex[:8]}"
        spec = {"mount": {"topic": topic, "content_type": "text/plain", "appends": appends}}
        async with http.put(f"{base}/{mounted}", json=spec) as response:
            assert response.status == 201, await response.text()
        mounts.append(mounted)
    return Views(bucket, ("json", "json-fork", "text"), tuple(mounts))


async def _no_stray_text(watched: Watched, where: str) -> None:
    found = await watched.page.evaluate(STRAY_TEXT)
    assert found == [], f"{where}: {found}"


async def _walk(watched: Watched, base: str, views: Views) -> None:
    """Every view of `views`, each once loaded (a stream's with its Kafka records open where
    it has them), with no stray text in any."""
    page = watched.page
    await page.goto(f"{base}/ui/#/")
    await page.get_by_role("link", name=views.mounts[-1]).wait_for()
    await _no_stray_text(watched, "buckets")
    buckets = [(views.bucket, views.streams)] + [(m, views.keys) for m in views.mounts]
    for bucket, streams in buckets:
        await page.goto(f"{base}/ui/#/b/{bucket}")
        await page.locator("#streams tbody tr").nth(len(streams) - 1).wait_for()
        await _no_stray_text(watched, f"streams of {bucket}")
        for stream in streams:
            await page.goto(f"{base}/ui/#/s/{bucket}/{stream}")
            await watched.wait_for(
                "(path) => window.consoleLive?.path === path && window.consoleLive.upToDate"
                " && document.querySelectorAll('#messages tr').length > 0",
                f"/{bucket}/{stream}",
            )
            if await page.locator("#show-coordinates").count():
                await page.locator("details:has(#show-coordinates) summary").click()
                await page.locator("#show-coordinates").click()
                await page.locator("#coordinates table").wait_for()
            await _no_stray_text(watched, f"stream {bucket}/{stream}")


async def test_no_view_of_the_read_write_console_shows_null_or_undefined(
    watched: Watched, adapter_url: str, http: aiohttp.ClientSession, kafka_bootstrap: str
) -> None:
    """`console = rw`: buckets, a bucket's streams, a JSON stream, its fork, a text stream, a
    read-only and a writable mounted topic and a key of each: no "null", "undefined" or "NaN"
    anywhere but in messages."""
    views = await _views(http, adapter_url, kafka_bootstrap)
    await _walk(watched, adapter_url, views)
    await watched.shot("walk-read-write")


async def test_no_view_of_the_read_only_console_shows_null_or_undefined(
    browser: BrowserContext,
    read_only_url: str,
    http: aiohttp.ClientSession,
    kafka_bootstrap: str,
) -> None:
    """The same walk with `console = ro`, where the write forms are left out."""
    views = await _views(http, read_only_url, kafka_bootstrap)
    watched = Watched(await browser.new_page())
    await _walk(watched, read_only_url, views)
    await watched.shot("walk-read-only")
    await watched.page.close()
    assert watched.errors == [], watched.failed


async def test_each_row_names_the_offset_to_resume_after_it(stage: Stage) -> None:
    """Two messages of one read: each row's "Next offset" resumes after that row, the last
    one's is the stream's tail; the first row's, pasted into "Start from", shows the second
    row (the read's own offset on both rows would skip it)."""
    watched, page = stage.watched, stage.page
    made = await stage.stream("rows", b'[{"n":1},{"n":2}]')
    await wait_rows(watched, 2)
    offsets = await page.locator("#messages td.offset").all_text_contents()
    assert offsets[1] == await tail_offset(stage.http, made.url)
    assert offsets[0] < offsets[1]
    assert await page.locator("table.messages thead th").nth(1).text_content() == "Next offset"
    await page.locator("#start-offset").fill(offsets[0])
    await page.locator("#start-offset").press("Enter")
    await page.wait_for_url(f"**from={offsets[0]}")
    await wait_rows(watched, 1)
    assert await json_rows(page) == [{"n": 2}]
    await watched.shot("stream-next-offsets")
