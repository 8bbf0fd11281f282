"""Which topics a bucket's admin may mount over HTTP: only those the operator allows
(`mount_topics`, none by default), and never any deployment's internals, Kafka's own topics or
a topic under our prefix, whatever the allow-list says. Refused before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from adapter.app import create_app
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready
from tests.tokens import token_file

TENANT = "tenant-admin-token-0123456789"


def _create_topics(bootstrap: str, *topics: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(t, num_partitions=1, replication_factor=1) for t in topics]
    )
    for future in futures.values():
        future.result(30)


async def _tenant_client(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, tmp_path: Path, allowed: str
) -> Client:
    """An adapter with auth on, where the tenant's token has `admin:` on its own buckets."""
    tokens = token_file(
        tmp_path / "tokens.toml", {"tenant": (TENANT, ["admin:mine-*", "read:mine-*"])}
    )
    settings = make_settings(auth_mode="static", auth_token_file=str(tokens), mount_topics=allowed)
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    return client


async def _mount(client: Client, bucket: str, topic: str) -> tuple[int, str]:
    """The status of a tenant's mount of `topic` as `bucket`, and its error code if any."""
    response = await client.put(
        f"/{bucket}",
        data=json.dumps({"mount": {"topic": topic}}),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {TENANT}"},
    )
    body = await response.json()
    return response.status, body.get("error", {}).get("code", "")


async def test_by_default_no_topic_is_mounted_over_http(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, tmp_path: Path, unique: str
) -> None:
    payments = f"payments-{unique}"
    _create_topics(make_settings().bootstrap_servers, payments)
    client = await _tenant_client(aiohttp_client, make_settings, tmp_path, "")
    assert await _mount(client, f"mine-{unique}", payments) == (403, "topic_not_allowed")
    listed = await client.get(f"/mine-{unique}", headers={"Authorization": f"Bearer {TENANT}"})
    assert listed.status == 404  # nothing was registered


async def test_a_bucket_admin_mounts_only_what_the_operator_allows(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, tmp_path: Path, unique: str
) -> None:
    shared, payments = f"shared-{unique}-orders", f"payments-{unique}"
    other_internal = f"other{unique}.internal.meta"  # another deployment's internals
    _create_topics(make_settings().bootstrap_servers, shared, payments, other_internal)
    allowed = f"shared-{unique}-*, *.internal.*, __*"  # the never-mounted stay refused
    client = await _tenant_client(aiohttp_client, make_settings, tmp_path, allowed)
    prefix = make_settings().topic_prefix
    assert await _mount(client, f"mine-{unique}-a", shared) == (201, "")
    assert await _mount(client, f"mine-{unique}-b", payments) == (403, "topic_not_allowed")
    assert await _mount(client, f"mine-{unique}-c", other_internal) == (403, "topic_not_allowed")
    assert await _mount(client, f"mine-{unique}-d", "__consumer_offsets") == (
        403,
        "topic_not_allowed",
    )
    assert await _mount(client, f"mine-{unique}-e", f"{prefix}internal.meta") == (
        409,
        "topic_conflict",
    )
    assert await _mount(client, f"other-{unique}", shared) == (403, "insufficient_scope")
