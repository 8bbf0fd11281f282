"""The app factory: wires settings, Kafka admin, object store and routes into one aiohttp app."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from aiohttp import web

from adapter.config import Settings
from adapter.http import health
from adapter.http.render import errors_middleware
from adapter.objects.factory import object_store
from adapter.readiness import Readiness
from adapter.supervisor import CHECKS, Supervisor
from topology.admin import TopologyAdmin
from topology.specs import TopicLayout

SETTINGS = web.AppKey("settings", Settings)
ADMIN = web.AppKey("admin", TopologyAdmin)
# Resolves with the exception that makes serving impossible (e.g. a misconfigured topic).
FATAL = web.AppKey("fatal", asyncio.Future[BaseException])


def topic_layout(settings: Settings) -> TopicLayout:
    return TopicLayout(
        prefix=settings.topic_prefix,
        partitions=settings.partitions,
        replication_factor=settings.replication_factor,
        min_insync_replicas=settings.min_insync_replicas,
        max_message_bytes=settings.max_message_bytes,
    )


def create_app(settings: Settings) -> web.Application:
    app = web.Application(
        middlewares=[errors_middleware], client_max_size=settings.max_message_bytes
    )
    app[SETTINGS] = settings
    app[health.READINESS] = Readiness(CHECKS)
    app.add_routes(health.routes)
    app.cleanup_ctx.append(_lifecycle)
    return app


async def _lifecycle(app: web.Application) -> AsyncIterator[None]:
    settings = app[SETTINGS]
    app[ADMIN] = admin = TopologyAdmin(
        settings.bootstrap_servers, topic_layout(settings), settings.kafka_timeout_s
    )
    supervisor = Supervisor(admin, object_store(settings), app[health.READINESS])
    fatal: asyncio.Future[BaseException] = asyncio.get_running_loop().create_future()
    app[FATAL] = fatal
    task = asyncio.create_task(supervisor.run(), name="supervisor")
    task.add_done_callback(lambda done: _report(done, fatal))
    yield
    task.cancel()
    await asyncio.wait([task])  # its outcome, if any, is already in `fatal`


def _report(task: asyncio.Task[None], fatal: asyncio.Future[BaseException]) -> None:
    if not task.cancelled() and not fatal.done():
        error = task.exception()
        fatal.set_result(error or RuntimeError("supervisor stopped"))
