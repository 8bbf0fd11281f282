"""Creating and verifying topics through Kafka's admin API, with a timeout on every call.

The admin client lives as long as the instance. One whose calls have found no broker for
`STALLED_S` (every call since the first failure failed so) is made again from the bootstrap
servers (`client_stalls.py` says why): bucket creation and deletion, the tier's and
retention's record deletions and the dead owners' eviction go through it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from dataclasses import replace
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import ConfigResource, NewTopic, ResourceType

from topology.client_stalls import STALLED_S, UNREACHED, Stall, unreached
from topology.errors import (
    AccessDenied,
    BrokerUnavailable,
    TopicMissing,
    TopicNotKnownYet,
    TopologyError,
    TopologyMismatch,
)
from topology.group_members import describe
from topology.kafka_client import KafkaAccess, denied, serve_callbacks
from topology.management import TopicPolicy, config_findings
from topology.plan import kafka_topics_command
from topology.specs import TopicLayout, TopicSpec, internal_specs, slots_topic_spec

log = logging.getLogger(__name__)


class TopologyAdmin:
    """The admin client of one adapter instance.

    Every topic creation and deletion goes through `policy`: with `topic_management =
    external` none reaches Kafka, and a topic we need that is missing is a TopicMissing
    carrying the command that creates it.
    """

    def __init__(
        self,
        kafka: KafkaAccess,
        layout: TopicLayout,
        timeout_s: float,
        policy: TopicPolicy | None = None,
    ) -> None:
        self.kafka = kafka
        self.layout = layout
        self.timeout_s = timeout_s
        self.policy = policy or TopicPolicy()
        self.bootstrap_servers = kafka.bootstrap_servers
        self._config = kafka.config({"client.id": "durable-kafka-admin"}, "librdkafka.admin")
        self._client = kafka.admin_client(self._config)
        self._stall = Stall(STALLED_S)

    def renew(self) -> None:
        """A new admin client, which reads the client's files again (a rotated certificate);
        a call under way ends on the old one, which it holds."""
        try:
            self._client = self.kafka.admin_client(self._config)
        except KafkaException as error:  # librdkafka refused the new files: the old one stays
            log.error("the admin client not renewed: %s", error)

    def _reached(self, reached: bool) -> None:
        """A call's outcome: whether a broker answered it (a refusal is an answer). A client
        whose calls have all gone unanswered for `STALLED_S` is made again."""
        if self._stall.too_long(not reached, time.monotonic()):
            log.warning(
                "the admin client has not reached Kafka for %.0fs: making it again, from the "
                "bootstrap servers",
                self._stall.limit_s,
            )
            self.renew()

    async def _metadata(self, topic: str | None = None) -> Any:
        """The cluster's metadata (of `topic` alone if given); KafkaException when unanswered
        (UNKNOWN_TOPIC_OR_PART is an answer)."""
        try:
            metadata = await asyncio.to_thread(
                self._client.list_topics, topic=topic, timeout=self.timeout_s
            )
        except KafkaException as error:
            self._reached(not unreached(error))
            raise
        self._reached(True)
        return metadata

    def _unanswered(self, error: KafkaException) -> BrokerUnavailable:
        """A failed metadata request, explained by an authentication or TLS failure a client
        reported (the call itself says only that the transport failed)."""
        serve_callbacks(self._client)
        return BrokerUnavailable(self.kafka.problems.explain(f"metadata request failed: {error}"))

    async def topic_names(self) -> set[str]:
        """Every topic on the cluster; BrokerUnavailable when the metadata request times out."""
        try:
            metadata = await self._metadata()
        except KafkaException as error:
            raise self._unanswered(error) from error
        return set(metadata.topics)

    async def broker_count(self) -> int:
        """How many brokers the cluster's metadata lists; BrokerUnavailable on a timeout."""
        try:
            metadata = await self._metadata()
        except KafkaException as error:
            raise self._unanswered(error) from error
        return len(metadata.brokers)

    def use_replication(self, replication_factor: int, min_insync_replicas: int) -> None:
        """Give topics created from now on these (start resolves them from the broker count)."""
        self.layout = replace(
            self.layout,
            replication_factor=replication_factor,
            min_insync_replicas=min_insync_replicas,
        )

    async def ensure_internal_topics(self) -> list[str]:
        """Create the missing internal topics, verify the existing ones; return those created."""
        slots = slots_topic_spec(self.layout)
        created = await self.ensure(internal_specs(self.layout))
        if slots.name not in created:  # one we just created has them by construction
            await self._verify_partitions(slots)
        return created

    async def partition_count(self, topic: str) -> int:
        """How many partitions an existing topic has; BrokerUnavailable while its metadata
        lists none yet (a topic created moments ago) or the broker does not answer."""
        try:
            metadata = await self._metadata(topic)
        except KafkaException as error:
            raise self._unanswered(error) from error
        found = len(metadata.topics[topic].partitions)
        if found == 0:
            raise BrokerUnavailable(f"topic {topic} has no partitions in metadata yet")
        return found

    async def _verify_partitions(self, spec: TopicSpec) -> None:
        """The slots topic must have exactly one partition per write slot."""
        found = await self.partition_count(spec.name)
        if found != spec.partitions:
            raise TopologyMismatch(
                f"topic {spec.name} has {found} partitions but write_slots is {spec.partitions};"
                " every instance of one topic_prefix needs the same write_slots"
            )

    async def ensure(self, specs: list[TopicSpec]) -> list[str]:
        """Create the missing topics (TopicMissing instead when a platform team manages them),
        verify the others; return those created."""
        existing = await self.topic_names()
        missing = [spec for spec in specs if spec.name not in existing]
        if missing and not self.policy.manages_topics:
            commands = [kafka_topics_command(s, self.bootstrap_servers) for s in missing]
            raise TopicMissing([spec.name for spec in missing], commands)
        created = await self._create(missing)
        await self._verify([spec for spec in specs if spec.name not in created])
        return created

    async def _create(self, specs: list[TopicSpec]) -> list[str]:
        if not specs:
            return []
        self.policy.allow("create", (spec.name for spec in specs))
        new = [
            NewTopic(s.name, s.partitions, s.replication_factor, config=dict(s.configs))
            for s in specs
        ]
        futures = self._client.create_topics(new, operation_timeout=self.timeout_s)
        created = []
        for name, future in futures.items():
            try:
                await self._wait(future)
            except KafkaException as error:
                if _code(error) != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise _translate(error, f"creating topic {name}", ("Create", name)) from error
                continue  # another instance won the race; _verify checks what it made
            log.info("created topic %s", name)
            created.append(name)
        return created

    async def _verify(self, specs: list[TopicSpec]) -> None:
        for spec in specs:
            actual = await self._configs_of_existing(spec.name)
            findings = config_findings(spec, actual, self.policy)
            if findings.refusals:
                raise TopologyMismatch(
                    f"topic {spec.name} has {'; '.join(findings.refusals)}; fix the topic"
                    " (kafka-configs.sh --alter) or choose another topic_prefix"
                )
            for warning in findings.warnings:
                log.warning("topic %s has %s", spec.name, warning)

    async def _configs_of_existing(self, topic: str) -> dict[str, str]:
        """The configs of a topic the metadata listed or a creation found existing: the broker
        asked may not have learnt of it yet (another instance created it a moment ago), so it
        is asked again until `timeout_s` has passed."""
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        while True:
            try:
                return await self.describe_configs(topic)
            except TopicNotKnownYet:
                if asyncio.get_running_loop().time() >= deadline:
                    raise
                await asyncio.sleep(0.1)

    async def describe_configs(self, topic: str) -> dict[str, str]:
        resource = ConfigResource(ResourceType.TOPIC, topic)
        futures = self._client.describe_configs([resource], request_timeout=self.timeout_s)
        try:
            entries: dict[str, Any] = await self._wait(futures[resource])
        except KafkaException as error:
            if _code(error) == KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise TopicNotKnownYet(f"describing topic {topic}: not known yet") from error
            raise _translate(
                error, f"describing topic {topic}", ("DescribeConfigs", topic)
            ) from error
        return {key: entry.value for key, entry in entries.items()}

    async def topic_exists(self, name: str) -> bool:
        """Whether the cluster's metadata has the topic (one being created counts, one the
        broker says is unknown does not); BrokerUnavailable when the broker does not answer."""
        try:
            metadata = await self._metadata(name)
        except KafkaException as error:
            if _code(error) == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return False
            raise self._unanswered(error) from error
        topic = metadata.topics.get(name)
        return topic is not None and not _unknown(topic.error)

    async def delete_topics(self, names: list[str]) -> None:
        """Delete the topics; one that is already gone counts as deleted (retries are safe)."""
        if not names:
            return
        self.policy.allow("delete", names)
        futures = self._client.delete_topics(names, operation_timeout=self.timeout_s)
        for name, future in futures.items():
            try:
                await self._wait(future)
            except KafkaException as error:
                if _code(error) != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise _translate(error, f"deleting topic {name}", ("Delete", name)) from error

    async def delete_records(self, topic: str, partition: int, before: int) -> int:
        """Free every record of the partition below offset `before` (Kafka's DeleteRecords);
        return the partition's log start offset after it. Asking again is harmless."""
        futures = self._client.delete_records(
            [TopicPartition(topic, partition, before)], operation_timeout=self.timeout_s
        )
        try:
            (future,) = futures.values()
            deleted = await self._wait(future)
        except KafkaException as error:
            doing = f"deleting records of {topic}[{partition}]"
            raise _translate(error, doing, ("Delete", topic)) from error
        return int(getattr(deleted, "low_watermark", before))

    async def group_instance_ids(self, group: str) -> list[str]:
        """The members of a consumer group, by static instance id (else client id): none
        when the group does not exist. Asked by a child process (`group_members.py`)."""
        try:
            members = await asyncio.to_thread(describe, self.kafka, group, self.timeout_s)
        except KafkaException as error:
            # Describing needs Describe on the group, which Kafka implies from Read: the grant
            # an instance is documented to need (topology/acls.py), so the one to name.
            raise _translate(
                error, f"describing group {group}", ("Read", group), kind="Group"
            ) from error
        return [m.group_instance_id or m.client_id for m in members]

    async def topic_id(self, topic: str) -> str:
        """The topic's id: a topic deleted and created again under its name has a new one."""
        futures = self._client.describe_topics(
            TopicCollection([topic]), request_timeout=self.timeout_s
        )
        try:
            described = await self._wait(futures[topic])
        except KafkaException as error:
            # Describe on the topic, implied from the documented Read.
            raise _translate(error, f"describing topic {topic}", ("Read", topic)) from error
        return str(described.topic_id)

    async def _wait(self, future: concurrent.futures.Future[Any]) -> Any:
        try:
            done = await asyncio.wait_for(asyncio.wrap_future(future), self.timeout_s + 1)
        except TimeoutError as error:
            self._reached(False)
            raise BrokerUnavailable("the broker did not answer in time") from error
        except KafkaException as error:
            self._reached(not unreached(error))
            raise
        self._reached(True)
        return done


def _code(error: KafkaException) -> int | None:
    inner = error.args[0] if error.args else None
    return inner.code() if isinstance(inner, KafkaError) else None


def _unknown(error: KafkaError | None) -> bool:
    return error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def _translate(
    error: KafkaException, doing: str, asked: tuple[str, str], kind: str = "Topic"
) -> Exception:
    """BrokerUnavailable when retrying may help, AccessDenied naming what an ACL refused
    (`asked`: the operation and the name of the `kind` of resource the call touched)."""
    inner = error.args[0] if error.args else None
    if isinstance(inner, KafkaError) and (refusal := denied(inner, {kind: asked})):
        return AccessDenied(f"{doing}: {refusal}")
    if isinstance(inner, KafkaError) and (inner.retriable() or inner.code() in _TRANSIENT):
        return BrokerUnavailable(f"{doing}: {inner.str()}")
    return TopologyError(f"{doing}: {error}")


_TRANSIENT = UNREACHED | {KafkaError.REQUEST_TIMED_OUT}
