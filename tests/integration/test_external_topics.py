"""`topic_management = external` on a real broker: topics created beforehand as a platform
team would; the server verifies and uses them and never creates, alters or deletes one."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from aiohttp import web
from aiohttp.test_utils import TestClient

from adapter.app import FATAL, PARTS, create_app
from adapter.config import Settings
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready
from tests.platform_topics import create_platform_topics, planned_topics, topics_with_prefix
from topology.errors import TopicMissing, TopologyMismatch
from topology.naming import InternalTopic, bucket_topic, internal_topic
from topology.specs import TopicSpec

TEXT = {"Content-Type": "text/plain"}


def _admin_config(settings: Settings) -> dict[str, str]:
    return {"bootstrap.servers": settings.bootstrap_servers}


def _external(make_settings: SettingsFactory) -> Settings:
    return make_settings(topic_management="external")


async def _error(client: Client, method: str, path: str) -> tuple[int, str, str]:
    response = await client.request(method, path)
    body = await response.json()
    return response.status, body["error"]["code"], body["error"]["message"]


async def test_serves_the_platform_topics_and_creates_nothing(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str
) -> None:
    settings = _external(make_settings)
    ready, absent, loose = f"ready-{unique}", f"absent-{unique}", f"loose-{unique}"
    specs = planned_topics(settings, [ready])
    specs[-1] = replace(specs[-1], partitions=2)  # the team's choice, not our `partitions` (3)
    # A topic made with the cluster's defaults: 7 days' retention would lose stream data.
    specs.append(TopicSpec(bucket_topic(settings.topic_prefix, loose), 1, 1, {}))
    create_platform_topics(_admin_config(settings), specs)
    before = topics_with_prefix(_admin_config(settings), settings.topic_prefix)

    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    assert (await client.put(f"/{ready}")).status == 201
    assert client.app[PARTS].catalog.bucket(ready).partitions == 2  # type: ignore[union-attr]
    for stream in ("s1", "s2", "s3", "s4"):
        assert (await client.put(f"/{ready}/{stream}", headers=TEXT)).status == 201
        assert (await client.post(f"/{ready}/{stream}", data=b"hi", headers=TEXT)).status == 204
        read = await client.get(f"/{ready}/{stream}", params={"offset": "-1"})
        assert (read.status, await read.read()) == (200, b"hi")

    status, code, message = await _error(client, "PUT", f"/{absent}")
    assert (status, code) == (409, "topic_missing")
    topic = bucket_topic(settings.topic_prefix, absent)
    assert f"kafka-topics.sh --bootstrap-server {settings.bootstrap_servers} --create" in message
    assert f"--topic {topic} --partitions 3 --replication-factor 1" in message
    assert "--config cleanup.policy=delete --config retention.ms=-1" in message
    status, code, _ = await _error(client, "PUT", f"/v1/stream/{absent}/on-demand")
    assert (status, code) == (409, "topic_missing")
    status, code, message = await _error(client, "PUT", f"/{loose}")
    assert (status, code) == (409, "topic_conflict")
    assert "retention.ms='604800000' (durable-kafka needs retention.ms='-1')" in message

    for stream in ("s1", "s2", "s3", "s4"):
        assert (await client.delete(f"/{ready}/{stream}")).status == 204
    assert (await client.delete(f"/{ready}")).status == 204  # the topic stays the team's
    assert (await client.get(f"/{ready}")).status == 404
    assert topics_with_prefix(_admin_config(settings), settings.topic_prefix) == before


async def _refused_start(client: TestClient[web.Request, web.Application]) -> BaseException:
    fatal = await asyncio.wait_for(asyncio.shield(client.app[FATAL]), 60)
    assert (await client.get("/readyz")).status == 503
    return fatal


async def test_start_is_refused_with_the_meta_topic_not_compacted(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory
) -> None:
    settings = _external(make_settings)
    meta = internal_topic(settings.topic_prefix, InternalTopic.META)
    specs = [
        replace(s, configs=s.configs | {"cleanup.policy": "delete"}) if s.name == meta else s
        for s in planned_topics(settings)
    ]
    create_platform_topics(_admin_config(settings), specs)
    before = topics_with_prefix(_admin_config(settings), settings.topic_prefix)
    fatal = await _refused_start(await aiohttp_client(create_app(settings)))
    assert isinstance(fatal, TopologyMismatch)
    assert f"topic {meta} has cleanup.policy='delete'" in str(fatal)
    assert "needs cleanup.policy='compact'" in str(fatal)
    assert topics_with_prefix(_admin_config(settings), settings.topic_prefix) == before


async def test_start_is_refused_with_an_internal_topic_missing(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory
) -> None:
    settings = _external(make_settings)
    producers = internal_topic(settings.topic_prefix, InternalTopic.PRODUCERS)
    specs = [s for s in planned_topics(settings) if s.name != producers]
    create_platform_topics(_admin_config(settings), specs)
    before = topics_with_prefix(_admin_config(settings), settings.topic_prefix)
    fatal = await _refused_start(await aiohttp_client(create_app(settings)))
    assert isinstance(fatal, TopicMissing)
    assert fatal.names == [producers]
    assert f"--create --topic {producers} --partitions 1" in str(fatal)
    assert "--config cleanup.policy=compact" in str(fatal)
    assert topics_with_prefix(_admin_config(settings), settings.topic_prefix) == before
