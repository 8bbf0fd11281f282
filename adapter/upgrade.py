"""`durable-kafka upgrade status` and `upgrade finalize`: where a deployment stands between
two record format levels (`adapter/state/format_gate.py`), and switching the newest on.

Both replay the meta topic (what the log shows in force) and describe the owners' group (what
each live instance reads: its `client.id`). A member that died leaves the group after its
session timeout and no longer counts; a member that predates format levels says nothing and
is taken to read, and write, the previous level.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import asdict, dataclass

from confluent_kafka import KafkaException, Producer

from adapter.config import Settings
from adapter.log.errors import LogUnavailable
from adapter.parts import kafka_access
from adapter.state.catalog import Catalog
from adapter.state.follower import MetaFollower
from adapter.state.format_gate import GATE, level_record, member_reads
from topology.errors import TopologyError
from topology.group_members import READS_MARK, describe, member_url
from topology.internal_records import FORMAT_LEVEL_KEY, NEWEST_LEVEL, PREVIOUS_LEVEL
from topology.kafka_client import KafkaAccess
from topology.naming import StateTopics, owners_group


@dataclass(frozen=True)
class Instance:
    instance_id: str
    url: str
    reads: int  # the newest format level it reads
    writes: int  # the level it writes now (a moment behind the level in force at most)
    predates_levels: bool


@dataclass(frozen=True)
class Standing:
    in_force: int  # 0: the meta topic is empty (the first instance decides)
    newest: int  # the newest level this version reads and can switch on
    instances: list[Instance]

    @property
    def can_finalize(self) -> bool:
        return all(instance.reads >= self.newest for instance in self.instances)


async def standing(settings: Settings) -> Standing:
    """Where the deployment stands. LogUnavailable, TopologyError or KafkaException when the
    meta topic cannot be read or the owners' group described."""
    kafka = kafka_access(settings)
    topics = StateTopics.of(settings.topic_prefix)
    catalog = Catalog()
    follower = MetaFollower(kafka, topics, catalog, settings.kafka_timeout_s, lambda _key: None)
    try:
        await follower.replay()
    finally:
        await follower.close()
    group = owners_group(settings.topic_prefix)
    members = await asyncio.to_thread(describe, kafka, group, settings.kafka_timeout_s)
    shown = GATE.known or (PREVIOUS_LEVEL if catalog.bucket_ids() else 0)
    in_force = max(shown, PREVIOUS_LEVEL) if shown else 0
    instances = []
    for member in sorted(members, key=lambda m: m.group_instance_id or m.client_id):
        reads = member_reads(member.client_id)
        instances.append(
            Instance(
                member.group_instance_id or "",
                member_url(member.client_id),
                reads,
                min(reads, in_force or reads),
                READS_MARK not in member.client_id,
            )
        )
    return Standing(in_force, NEWEST_LEVEL, instances)


def print_standing(found: Standing, as_json: bool) -> None:
    if as_json:
        print(json.dumps(asdict(found) | {"can_finalize": found.can_finalize}))
        return
    in_force = found.in_force or "none yet (no state records)"
    print(f"format level in force: {in_force}; newest this version reads: {found.newest}")
    for instance in found.instances:
        said = " (predates format levels)" if instance.predates_levels else ""
        print(
            f"  {instance.instance_id or '-'} {instance.url}: reads {instance.reads}{said}, "
            f"writes {instance.writes}"
        )
    if not found.instances:
        print("  no instance is a member of the owners' group")
    if found.in_force >= found.newest:
        print("nothing to finalize")
    elif found.can_finalize:
        print(
            f"every instance reads {found.newest}: `durable-kafka upgrade finalize` switches it on"
        )
    else:
        print(f"upgrade every instance before finalizing level {found.newest}")


async def run(settings: Settings, command: str, as_json: bool) -> int:
    """`upgrade status` (0) or `upgrade finalize` (0 done or nothing to do; 1 refused)."""
    try:
        found = await standing(settings)
    except (LogUnavailable, TopologyError, KafkaException) as error:
        print(f"durable-kafka: {error}", file=sys.stderr)
        return 1
    if command == "status":
        print_standing(found, as_json)
        return 0
    if found.in_force >= found.newest:
        print(f"format level {found.in_force} is already in force")
        return 0
    behind = [i for i in found.instances if i.reads < found.newest]
    if behind:
        names = ", ".join(f"{i.instance_id or i.url} (reads {i.reads})" for i in behind)
        print(
            f"durable-kafka: not every instance reads format level {found.newest}: {names}; "
            "upgrade them first",
            file=sys.stderr,
        )
        return 1
    try:
        await asyncio.to_thread(_write_level, kafka_access(settings), settings, found.newest)
    except (KafkaException, TimeoutError) as error:
        print(f"durable-kafka: writing the format level: {error}", file=sys.stderr)
        return 1
    print(f"format level {found.newest} is in force: every instance switches to it in a moment")
    return 0


def _write_level(kafka: KafkaAccess, settings: Settings, level: int) -> None:
    """Append the format-level record to the meta topic and wait for its acknowledgement."""
    producer = Producer(kafka.config({"enable.idempotence": True}, "librdkafka.upgrade"))
    errors: list[str] = []

    def delivered(error: object, _message: object) -> None:
        if error is not None:
            errors.append(str(error))

    topic = StateTopics.of(settings.topic_prefix).meta
    producer.produce(topic, level_record(level), FORMAT_LEVEL_KEY.encode(), on_delivery=delivered)
    if producer.flush(settings.kafka_timeout_s) or errors:
        raise TimeoutError(errors[0] if errors else f"no acknowledgement from {topic} in time")
