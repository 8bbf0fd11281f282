"""Creating and verifying the internal compacted topics on a real broker."""

from __future__ import annotations

from dataclasses import replace

import pytest

from adapter.config import Settings
from adapter.parts import kafka_access, topic_layout
from tests.conftest import SettingsFactory
from tests.integration.test_tiering import until
from topology.admin import TopologyAdmin
from topology.errors import BrokerUnavailable, TopologyMismatch
from topology.naming import InternalTopic, internal_topic, slots_topic
from topology.specs import TopicSpec


def _admin(settings: Settings) -> TopologyAdmin:
    admin = TopologyAdmin(kafka_access(settings), topic_layout(settings), timeout_s=5)
    admin.use_replication(1, 1)  # what start resolves `auto` to on the single test broker
    return admin


async def test_creates_internal_topics_once(make_settings: SettingsFactory) -> None:
    settings = make_settings()
    admin = _admin(settings)
    names = {internal_topic(settings.topic_prefix, which) for which in InternalTopic}
    slots = slots_topic(settings.topic_prefix)
    assert set(await admin.ensure_internal_topics()) == names | {slots}
    assert await admin.ensure_internal_topics() == []
    assert names | {slots} <= await admin.topic_names()
    for name in names:
        configs = await admin.describe_configs(name)
        assert configs["cleanup.policy"] == "compact"
        assert configs["max.message.bytes"] == str(settings.max_message_bytes)


async def test_refuses_a_slots_topic_of_another_size(make_settings: SettingsFactory) -> None:
    settings = make_settings(write_slots=4)
    await _admin(settings).ensure_internal_topics()
    with pytest.raises(TopologyMismatch, match="write_slots"):
        await _admin(replace(settings, write_slots=5)).ensure_internal_topics()


async def test_refuses_a_topic_with_the_wrong_policy(make_settings: SettingsFactory) -> None:
    settings = make_settings()
    admin = _admin(settings)
    meta = internal_topic(settings.topic_prefix, InternalTopic.META)
    await admin.ensure([TopicSpec(meta, 1, 1, {"cleanup.policy": "delete"})])
    with pytest.raises(TopologyMismatch, match=r"cleanup.policy='delete'.*'compact'"):
        await admin.ensure_internal_topics()


async def test_unreachable_broker_is_retriable(make_settings: SettingsFactory) -> None:
    settings = make_settings(bootstrap_servers="127.0.0.1:1")
    admin = TopologyAdmin(kafka_access(settings), topic_layout(settings), timeout_s=1)
    with pytest.raises(BrokerUnavailable) as raised:
        await admin.ensure_internal_topics()
    assert raised.value.retriable


async def test_counts_the_brokers(make_settings: SettingsFactory) -> None:
    assert await _admin(make_settings()).broker_count() == 1  # the session's single node


async def test_deleting_a_topic_already_gone_succeeds(make_settings: SettingsFactory) -> None:
    settings = make_settings()
    admin = _admin(settings)
    name = f"{settings.topic_prefix}bucket.gone"
    assert not await admin.topic_exists(name)
    await admin.ensure([TopicSpec(name, 1, 1, {"cleanup.policy": "delete"})])
    # A busy broker's metadata may list a topic a moment after its creation was acknowledged.
    await until(lambda: admin.topic_exists(name), f"{name} listed", tries=300)
    await admin.delete_topics([name])
    await admin.delete_topics([name])  # a retry of a deletion that took effect


async def test_describing_a_topic_not_known_yet_is_retriable(
    make_settings: SettingsFactory,
) -> None:
    """What a broker that has not learnt of a topic another instance just created answers."""
    settings = make_settings()
    with pytest.raises(BrokerUnavailable) as raised:
        await _admin(settings).describe_configs(f"{settings.topic_prefix}never.made")
    assert raised.value.retriable
