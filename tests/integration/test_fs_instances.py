"""The `fs` cold store is one machine's folder: a second instance of the deployment (another
member of the owners' group) refuses to start on it unless `cold_dir_shared` says every
instance sees the same folder, and an instance that sees another one join later reports
its object store not ready. On the real broker."""

from __future__ import annotations

import asyncio
from pathlib import Path

from adapter.app import FATAL, create_app
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready


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


async def test_an_instance_that_sees_another_join_later_is_not_ready(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, tmp_path: Path
) -> None:
    alone = make_settings(instance_id="alone", advertise_url="http://alone:4437")
    client = await aiohttp_client(create_app(alone))
    await wait_ready(client)
    # Another instance on a folder of its own, started with the operator's word that it is
    # shared: it takes write slots, and the first one sees their owner records.
    other = make_settings(
        instance_id="elsewhere",
        advertise_url="http://elsewhere:4437",
        cold_dir=str(tmp_path / "elsewhere"),
        cold_dir_shared=True,
    )
    await aiohttp_client(create_app(other))
    for _ in range(600):
        report = await (await client.get("/readyz")).json()
        check = report["checks"]["object_store"]
        if not check["ok"]:
            assert "http://elsewhere:4437" in check["detail"]
            assert "cold_dir_shared" in check["detail"]
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the instance never reported the other one")
