"""An app served as `durable-kafka serve` serves it (`ProtocolRunner` on a real port), and raw
HTTP/1.1 exchanges with it, for what an HTTP client library would refuse to send.

`served_adapter` (a pytest plugin of `tests/conftest.py`): one such adapter per test module
that asks for it, on the session's broker, under a topic prefix of its own."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import pytest_asyncio
from aiohttp import ClientSession, web

from adapter.app import create_app
from adapter.config import Settings
from adapter.http.server import ProtocolRunner

READ_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Served:
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


@contextlib.asynccontextmanager
async def served(app: web.Application) -> AsyncIterator[Served]:
    """The app on a free loopback port, once `/readyz` answers 200."""
    runner = ProtocolRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        where = Served(host, port)
        await wait_ready(where.url)
        yield where
    finally:
        await runner.cleanup()


@dataclass(frozen=True)
class ServedApp:
    where: Served
    app: web.Application


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def served_adapter(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ServedApp]:
    """One adapter for the module (each test uses it as a stranger would: nothing is shared)."""
    settings = Settings(
        bootstrap_servers=kafka_bootstrap,
        topic_prefix=f"m{uuid.uuid4().hex[:10]}.",
        partitions=2,
        cold_dir=str(tmp_path_factory.mktemp("cold")),
        kafka_timeout_ms=5_000,
        long_poll_timeout_ms=500,
    )
    app = create_app(settings)
    async with served(app) as where:
        yield ServedApp(where, app)


async def wait_ready(url: str, timeout_s: float = 60.0) -> None:
    """Until `/readyz` answers 200 (a fresh broker on a loaded machine takes tens of seconds
    to make the group coordinator and the transaction coordinator ready)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    async with ClientSession() as session:
        while loop.time() < deadline:
            async with session.get(f"{url}/readyz") as response:
                if response.status == 200:
                    return
            await asyncio.sleep(0.05)
    raise AssertionError("the adapter never became ready")


@dataclass(frozen=True)
class RawResponse:
    status: int
    headers: dict[str, str]  # lower-cased names; a repeated name keeps its last value
    body: bytes


async def exchange(where: Served, request: bytes) -> RawResponse:
    """Send `request` as is and read one answer (which must have a Content-Length)."""
    reader, writer = await asyncio.open_connection(where.host, where.port)
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(read_response(reader), READ_TIMEOUT_S)
    finally:
        writer.close()


async def read_response(reader: asyncio.StreamReader) -> RawResponse:
    head = await reader.readuntil(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").strip().split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return RawResponse(int(status_line.split()[1]), headers, body)
