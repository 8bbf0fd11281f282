"""An instance on a secured broker (tests/secure_kafka.py): over mTLS with only the documented
ACLs it does everything it does on an open broker; a wrong password, an unknown CA and a
missing ACL (tests/integration/test_secure_kafka_acls.py) each leave it not ready, saying why,
without a flood of log lines."""

from __future__ import annotations

import logging

import pytest

from adapter.app import create_app
from devstack.secure_kafka import APP, MTLS_CLIENT, SecureKafka
from tests.conftest import ClientFactory, SettingsFactory
from tests.secure_kafka import (
    existing_topic,
    new_prefix,
    read_committed,
    ready_or_why,
    secure_settings,
    until_detail,
    walk_through,
)
from topology.acls import instance_grants, mount_grants

WINDOW_S = 20
CHECK_INTERVAL_S = 2  # the supervisor's


@pytest.mark.timeout(240)
async def test_over_mtls_with_the_documented_acls_everything_works(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, secured_kafka: SecureKafka
) -> None:
    prefix, topic = new_prefix(), f"orders-{new_prefix()}"
    values = [f"order {n}".encode() for n in range(5)]
    existing_topic(secured_kafka, topic, values)
    secured_kafka.grant(MTLS_CLIENT, instance_grants(prefix) + mount_grants(topic))
    properties = secured_kafka.mtls_properties()
    settings = secure_settings(make_settings, secured_kafka.ssl_bootstrap, prefix, properties)
    client = await aiohttp_client(create_app(settings))
    assert await ready_or_why(client) is None

    kept: list[bytes] = []

    def read_back(bucket: str) -> None:  # through the same secure properties
        kept.extend(read_committed(secured_kafka.ssl_bootstrap, properties, prefix, bucket))

    walk = await walk_through(client, secured_kafka, prefix, topic, before_delete=read_back)

    assert walk.failure is None, walk
    assert b"x" * 700 in kept


@pytest.mark.timeout(120)
async def test_a_wrong_password_is_named_and_logged_once_per_check(
    aiohttp_client: ClientFactory,
    make_settings: SettingsFactory,
    secured_kafka: SecureKafka,
    caplog: pytest.LogCaptureFixture,
) -> None:
    prefix = new_prefix()
    secured_kafka.grant(APP, instance_grants(prefix))
    wrong = secured_kafka.sasl_properties(APP, password="not-the-password")
    settings = secure_settings(make_settings, secured_kafka.sasl_bootstrap, prefix, wrong)
    caplog.set_level(logging.INFO)
    client = await aiohttp_client(create_app(settings))

    detail = await until_detail(client, "kafka", "authentication failed")
    assert "SASL authentication error" in detail
    caplog.clear()
    assert await ready_or_why(client, wait_s=WINDOW_S) is not None
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    # At most one per check (2 s apart, each waiting for its metadata call), not one per
    # reconnection of each client (librdkafka's own lines are dropped).
    assert 1 <= len(lines) <= WINDOW_S / CHECK_INTERVAL_S, [r.getMessage() for r in lines]
    assert all(r.getMessage().startswith("kafka not reachable: authentication") for r in lines)
    assert not any(r.exc_info for r in caplog.records)
    await client.close()

    fixed = secured_kafka.sasl_properties(APP)
    settings = secure_settings(make_settings, secured_kafka.sasl_bootstrap, prefix, fixed)
    restarted = await aiohttp_client(create_app(settings))
    assert await ready_or_why(restarted) is None


@pytest.mark.timeout(120)
async def test_an_unknown_ca_is_named(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, secured_kafka: SecureKafka
) -> None:
    prefix = new_prefix()
    secured_kafka.grant(MTLS_CLIENT, instance_grants(prefix))
    properties = secured_kafka.mtls_properties() | {
        "ssl.ca.location": str(secured_kafka.rogue_ca_file)
    }
    settings = secure_settings(make_settings, secured_kafka.ssl_bootstrap, prefix, properties)
    client = await aiohttp_client(create_app(settings))

    detail = await until_detail(client, "kafka", "TLS handshake failed")
    assert "certificate verify failed" in detail
    assert await ready_or_why(client, wait_s=1) is not None
