"""Topics a platform team manages, on a secured broker: with `topic_management = "external"`
and the documented ACLs for it (no Create, Alter or AlterConfigs on the topics), an instance
serves the topics created beforehand by the cluster's admin and creates nothing."""

from __future__ import annotations

import pytest

from adapter.app import create_app
from devstack.secure_kafka import ADMIN, APP, SecureKafka
from tests.conftest import ClientFactory, SettingsFactory
from tests.platform_topics import create_platform_topics, planned_topics, topics_with_prefix
from tests.secure_kafka import new_prefix, read_committed, ready_or_why, secure_settings
from topology.acls import instance_grants


@pytest.mark.timeout(180)
async def test_external_topics_need_no_create_acl(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, secured_kafka: SecureKafka
) -> None:
    prefix = new_prefix()
    admin = {"bootstrap.servers": secured_kafka.sasl_bootstrap} | secured_kafka.sasl_properties(
        ADMIN
    )
    settings = secure_settings(
        make_settings,
        secured_kafka.sasl_bootstrap,
        prefix,
        secured_kafka.sasl_properties(APP),
        topic_management="external",
    )
    create_platform_topics(admin, planned_topics(settings, ["orders"]))
    grants = instance_grants(prefix, manage_topics=False)
    assert all("Create" not in grant.operations for grant in grants)
    secured_kafka.grant(APP, grants)
    before = topics_with_prefix(admin, prefix)

    client = await aiohttp_client(create_app(settings))
    assert await ready_or_why(client) is None
    assert (await client.put("/orders")).status == 201
    headers = {"Content-Type": "text/plain"}
    assert (await client.put("/orders/s", headers=headers)).status == 201
    for n in range(3):
        assert (await client.post("/orders/s", data=f"m{n}", headers=headers)).status == 204
    missing = await client.put("/absent")
    assert missing.status == 409
    assert (await missing.json())["error"]["code"] == "topic_missing"

    assert topics_with_prefix(admin, prefix) == before
    stored = read_committed(
        secured_kafka.sasl_bootstrap, secured_kafka.sasl_properties(APP), prefix, "orders"
    )
    assert stored[-3:] == [b"m0", b"m1", b"m2"]
