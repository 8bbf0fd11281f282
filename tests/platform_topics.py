"""Topics created beforehand as a platform team would, for `topic_management = external`.

`create_platform_topics` takes the admin client config of whoever may create topics (on a
secured cluster: a superuser's properties, not the server's), so a test whose server user
lacks Create/Alter/Delete can use it as it is.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import replace

from confluent_kafka.admin import AdminClient, NewTopic

from adapter.config import Settings
from adapter.parts import topic_layout
from topology.plan import required_topics
from topology.specs import TopicSpec

TIMEOUT_S = 30.0


def planned_topics(
    settings: Settings, buckets: Iterable[str] = (), replication_factor: int = 1
) -> list[TopicSpec]:
    """What `durable-kafka topics plan` prints for these settings, with this replication (the
    single shared broker allows 1; min.insync.replicas 1 below 3 replicas, else 2)."""
    isr = 2 if replication_factor >= 3 else 1
    layout = replace(
        topic_layout(settings), replication_factor=replication_factor, min_insync_replicas=isr
    )
    return required_topics(layout, buckets)


def create_platform_topics(admin_config: Mapping[str, str], specs: Iterable[TopicSpec]) -> None:
    """Create every topic as specified and wait until the metadata lists each of them."""
    admin = AdminClient(dict(admin_config))
    new = [
        NewTopic(s.name, s.partitions, s.replication_factor, config=dict(s.configs)) for s in specs
    ]
    for future in admin.create_topics(new, operation_timeout=TIMEOUT_S).values():
        future.result(TIMEOUT_S)
    wanted = {topic.topic for topic in new}
    deadline = time.monotonic() + TIMEOUT_S
    while not wanted <= set(admin.list_topics(timeout=TIMEOUT_S).topics):
        assert time.monotonic() < deadline, f"topics never listed: {sorted(wanted)}"
        time.sleep(0.1)


def topics_with_prefix(admin_config: Mapping[str, str], prefix: str) -> dict[str, int]:
    """Each topic under `prefix` with its partition count."""
    metadata = AdminClient(dict(admin_config)).list_topics(timeout=TIMEOUT_S)
    return {
        name: len(topic.partitions)
        for name, topic in metadata.topics.items()
        if name.startswith(prefix)
    }
