"""The `fs` cold store is one machine's folder: a second instance of the deployment (another
member of the owners' group) refuses to start on it unless `cold_dir_shared` says every
instance sees the same folder, and an instance that sees another one join later reports
its object store not ready. On the real broker."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from adapter.app import FATAL, create_app
from adapter.config import Settings
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready
from topology.naming import owners_group, slots_topic


async def _fatal_error(client: Client) -> BaseException:
    fatal = client.app[FATAL]
    for _ in range(600):
        if fatal.done():
            return fatal.result()
        await asyncio.sleep(0.1)
    raise AssertionError("the second instance kept running")


async def test_a_second_instance_on_a_folder_of_its_own_refuses_to_start(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, tmp_path: Path
) -> None:
    first = make_settings(instance_id="one", cold_dir=str(tmp_path / "one"))
    await wait_ready(await aiohttp_client(create_app(first)))
    second = await aiohttp_client(
        create_app(make_settings(instance_id="two", cold_dir=str(tmp_path / "two")))
    )
    error = await _fatal_error(second)
    assert "cold_dir_shared" in str(error), error
    assert "one" in str(error)
    assert (await second.get("/readyz")).status == 503


async def test_instances_on_a_shared_folder_and_workers_of_one_instance_start(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, tmp_path: Path
) -> None:
    shared = str(tmp_path / "shared")
    await wait_ready(await aiohttp_client(create_app(make_settings(instance_id="a.w0"))))
    # Workers of one `serve --workers` instance (ids differing by `.wN`) share its folder.
    await wait_ready(await aiohttp_client(create_app(make_settings(instance_id="a.w1"))))
    said_shared = make_settings(instance_id="b", cold_dir=shared, cold_dir_shared=True)
    await wait_ready(await aiohttp_client(create_app(said_shared)))


@pytest.fixture
def another_member(make_settings: SettingsFactory) -> Iterator[Consumer]:
    """A member of the deployment's owners' group that is no adapter (another instance
    joining): polled on a thread until the test ends."""
    settings: Settings = make_settings()
    consumer = Consumer(
        {
            "bootstrap.servers": settings.bootstrap_servers,
            "group.id": owners_group(settings.topic_prefix),
            "group.instance.id": "elsewhere",
            "client.id": "http://elsewhere:4437",
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": 6000,
        }
    )
    stop = threading.Event()

    def poll() -> None:
        consumer.subscribe([slots_topic(settings.topic_prefix)])
        while not stop.is_set():
            consumer.poll(0.2)

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    yield consumer
    stop.set()
    thread.join(10)
    consumer.unsubscribe()
    consumer.close()


async def test_an_instance_that_sees_another_join_later_is_not_ready(
    aiohttp_client: ClientFactory,
    make_settings: SettingsFactory,
    request: pytest.FixtureRequest,
) -> None:
    client = await aiohttp_client(create_app(make_settings(instance_id="alone")))
    await wait_ready(client)
    request.getfixturevalue("another_member")
    for _ in range(600):
        report = await (await client.get("/readyz")).json()
        check = report["checks"]["object_store"]
        if not check["ok"]:
            assert "elsewhere" in check["detail"]
            assert "cold_dir_shared" in check["detail"]
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the instance never reported the other one")
