"""The documented ACL set (topology/acls.py) is exactly what an instance needs: granted all but
one operation of it, an instance fails, naming the operation and the resource refused
(`DENIED: <operation> on <type> <name>`) in `/readyz`, an error or its log."""

from __future__ import annotations

import logging

import pytest

from adapter.app import create_app
from devstack.secure_kafka import APP, SecureKafka
from tests.conftest import ClientFactory, SettingsFactory
from tests.secure_kafka import (
    existing_topic,
    new_prefix,
    ready_or_why,
    secure_settings,
    walk_through,
)
from topology.acls import TOPIC, Grant, instance_grants, mount_grants

MOUNTED = "the mounted topic"  # stands for its name in REMOVALS


def _without(grants: list[Grant], operation: str) -> list[Grant]:
    return [
        Grant(g.resource, g.name, g.prefixed, tuple(o for o in g.operations if o != operation))
        for g in grants
    ]


REMOVALS = [
    (grant.resource, operation, grant.name == MOUNTED)
    for grant in instance_grants("p.") + mount_grants(MOUNTED)
    for operation in grant.operations
]


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    ("resource", "operation", "mounted"),
    REMOVALS,
    ids=[f"{r}-{o}{'-mounted' if m else ''}" for r, o, m in REMOVALS],
)
async def test_without_one_documented_operation_it_is_named_as_refused(
    aiohttp_client: ClientFactory,
    make_settings: SettingsFactory,
    secured_kafka: SecureKafka,
    caplog: pytest.LogCaptureFixture,
    resource: str,
    operation: str,
    mounted: bool,
) -> None:
    prefix, topic = new_prefix(), f"orders-{new_prefix()}"
    existing_topic(secured_kafka, topic, [b"an order"])
    own, mount = instance_grants(prefix), mount_grants(topic)
    kept = [g for g in own if g.resource != resource] + [
        g for g in _without(own, operation) if g.resource == resource
    ]
    secured_kafka.grant(APP, mount + kept if not mounted else own + _without(mount, operation))
    properties = secured_kafka.sasl_properties(APP)
    settings = secure_settings(make_settings, secured_kafka.sasl_bootstrap, prefix, properties)
    caplog.set_level(logging.WARNING)
    client = await aiohttp_client(create_app(settings))

    failure = await ready_or_why(client)
    if failure is None:
        failure = (await walk_through(client, secured_kafka, prefix, topic)).failure
    print(f"\nwithout {operation} on {resource}{' (mounted)' if mounted else ''}: {failure}")
    assert failure is not None
    refused = f"DENIED: {operation} on {resource} {topic if mounted else prefix}"
    assert refused in failure + caplog.text
    assert resource != TOPIC or not mounted or "mount: never indexed" in failure
