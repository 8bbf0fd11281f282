"""The ops listener (`ops_listen`, default 127.0.0.1:9464): `/metrics`, `/healthz`, `/readyz`.

Apart from the main listener so that metrics can be scraped from a private address while the
API is public, and so that a flood of API requests does not queue the scrape behind it.
`/healthz` and `/readyz` answer as on the main listener, from the same readiness.
"""

from __future__ import annotations

from aiohttp import web
from prometheus_client.aiohttp import make_aiohttp_handler

from adapter.http import health
from adapter.metrics import Metrics
from adapter.readiness import Readiness


def create_ops_app(metrics: Metrics, readiness: Readiness) -> web.Application:
    app = web.Application()
    app[health.READINESS] = readiness
    app.add_routes(health.routes)
    app.router.add_get("/metrics", make_aiohttp_handler(metrics.registry))
    return app
