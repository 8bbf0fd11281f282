"""`durable-kafka topics plan`: the topics the server needs, for a platform team to create."""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Literal

from adapter.config import Settings
from adapter.parts import kafka_access, topic_layout
from adapter.protocol.errors import ProtocolError
from adapter.protocol.identifiers import DEFAULT_BUCKET, validate_bucket_id
from topology.admin import TopologyAdmin
from topology.errors import BrokerUnavailable, TopologyError
from topology.plan import kafka_topics_script, required_topics, strimzi_topics
from topology.replication import AUTO, Replication, resolve
from topology.specs import TopicLayout

PlanFormat = Literal["kafka-topics", "strimzi"]
FORMATS: tuple[PlanFormat, ...] = ("kafka-topics", "strimzi")
DEFAULT_STRIMZI_CLUSTER = "my-cluster"


async def print_plan(
    settings: Settings, buckets: list[str], fmt: PlanFormat, strimzi_cluster: str
) -> int:
    """Print the plan; 1 (with the reason on stderr) for a bad bucket name, a replication
    the cluster refuses, or a cluster that cannot be asked for its size when `auto` needs it."""
    try:
        for bucket in buckets:
            if bucket != DEFAULT_BUCKET:
                validate_bucket_id(bucket)
        layout = await resolved_layout(settings)
    except ProtocolError as error:
        print(f"durable-kafka: {error.message}", file=sys.stderr)
        return 1
    except TopologyError as error:
        print(f"durable-kafka: {error}", file=sys.stderr)
        return 1
    specs = required_topics(layout, buckets)
    if fmt == "strimzi":
        print(strimzi_topics(specs, strimzi_cluster), end="")
    else:
        print(kafka_topics_script(specs, settings.bootstrap_servers), end="")
    return 0


async def resolved_layout(settings: Settings) -> TopicLayout:
    """The layout the server would create topics with: `auto` replication is resolved from
    the cluster's broker count, as at start (explicit counts need no cluster)."""
    layout = topic_layout(settings)
    wanted = Replication(
        settings.replication_factor, settings.min_insync_replicas, settings.allow_unreplicated
    )
    if AUTO in (wanted.replication_factor, wanted.min_insync_replicas):
        brokers = await _broker_count(settings, layout)
    else:
        brokers = wanted.replication_factor  # no cluster asked: the counts given are the plan
    rf, isr = resolve(brokers, wanted)
    return replace(layout, replication_factor=rf, min_insync_replicas=isr)


async def _broker_count(settings: Settings, layout: TopicLayout) -> int:
    admin = TopologyAdmin(kafka_access(settings), layout, settings.kafka_timeout_s)
    try:
        return await admin.broker_count()
    except BrokerUnavailable as error:
        raise BrokerUnavailable(
            f"replication_factor or min_insync_replicas is auto, which needs the cluster's"
            f" broker count: {error}; set both to plan without a cluster"
        ) from error
