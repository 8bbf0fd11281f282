"""A second origin for browser tests: a tiny server that serves one page and nothing else."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from aiohttp import web


@contextlib.asynccontextmanager
async def serving_page(port: int, html: str) -> AsyncIterator[str]:
    """`html` at `http://127.0.0.1:<port>/` while the context lasts; yields that origin."""

    async def page(_: web.Request) -> web.Response:
        return web.Response(text=html, content_type="text/html")

    app = web.Application()
    app.router.add_get("/", page)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()
