"""The ops listener (`ops_listen`, default 127.0.0.1:9464): `/metrics`, `/healthz`, `/readyz`.

Apart from the main listener so that metrics can be scraped from a private address while the
API is public, and so that a flood of API requests does not queue the scrape behind it.
`/healthz` and `/readyz` answer as on the main listener, from the same readiness; under
`serve --workers N`, for every worker of the instance (`pod_health.py`).
"""

from __future__ import annotations

from collections.abc import Mapping

from aiohttp import web
from prometheus_client.aiohttp import make_aiohttp_handler

from adapter.http import health
from adapter.http.pod_health import add_pod_routes
from adapter.metrics import Metrics
from adapter.readiness import Readiness


def create_ops_app(
    metrics: Metrics, readiness: Readiness, siblings: Mapping[str, str] | None = None
) -> web.Application:
    """`siblings` (a worker's: each sibling's URL -> its Unix socket): the probes' answers are
    the whole instance's (`pod_health.py`)."""
    app = web.Application()
    app[health.READINESS] = readiness
    if siblings:
        add_pod_routes(app, siblings)
    else:
        app.router.add_get("/healthz", health.healthz)
        app.router.add_get("/readyz", health.readyz)
    app.router.add_get("/metrics", make_aiohttp_handler(metrics.registry))
    return app
