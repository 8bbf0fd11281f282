"""Creating and verifying topics through Kafka's admin API, with a timeout on every call."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from topology.errors import (
    AccessDenied,
    BrokerUnavailable,
    TopicNotKnownYet,
    TopologyError,
    TopologyMismatch,
)
from topology.kafka_client import KafkaAccess, denied, serve_callbacks
from topology.specs import TopicLayout, TopicSpec, internal_topic_specs, slots_topic_spec

log = logging.getLogger(__name__)

# Settings a topic must have for us to write to it; others may drift and are only reported.
REQUIRED_CONFIGS = ("cleanup.policy",)


class TopologyAdmin:
    """The admin client of one adapter instance."""

    def __init__(self, kafka: KafkaAccess, layout: TopicLayout, timeout_s: float) -> None:
        self.kafka = kafka
        self.layout = layout
        self.timeout_s = timeout_s
        config = kafka.config({"client.id": "durable-kafka-admin"}, "librdkafka.admin")
        self._client = AdminClient(config)

    def _unanswered(self, error: KafkaException) -> BrokerUnavailable:
        """A failed metadata request, explained by an authentication or TLS failure a client
        reported (the call itself says only that the transport failed)."""
        serve_callbacks(self._client)
        return BrokerUnavailable(self.kafka.problems.explain(f"metadata request failed: {error}"))

    async def topic_names(self) -> set[str]:
        """Every topic on the cluster; BrokerUnavailable when the metadata request times out."""
        try:
            metadata = await asyncio.to_thread(self._client.list_topics, timeout=self.timeout_s)
        except KafkaException as error:
            raise self._unanswered(error) from error
        return set(metadata.topics)

    async def broker_count(self) -> int:
        """How many brokers the cluster's metadata lists; BrokerUnavailable on a timeout."""
        try:
            metadata = await asyncio.to_thread(self._client.list_topics, timeout=self.timeout_s)
        except KafkaException as error:
            raise self._unanswered(error) from error
        return len(metadata.brokers)

    async def ensure_internal_topics(self) -> list[str]:
        """Create the missing internal topics, verify the existing ones; return those created."""
        slots = slots_topic_spec(self.layout)
        created = await self.ensure([*internal_topic_specs(self.layout), slots])
        if slots.name not in created:  # one we just created has them by construction
            await self._verify_partitions(slots)
        return created

    async def _verify_partitions(self, spec: TopicSpec) -> None:
        """The slots topic must have exactly one partition per write slot."""
        try:
            metadata = await asyncio.to_thread(
                self._client.list_topics, topic=spec.name, timeout=self.timeout_s
            )
        except KafkaException as error:
            raise self._unanswered(error) from error
        found = len(metadata.topics[spec.name].partitions)
        if found == 0:  # metadata of a topic created moments ago by another instance
            raise BrokerUnavailable(f"topic {spec.name} has no partitions in metadata yet")
        if found != spec.partitions:
            raise TopologyMismatch(
                f"topic {spec.name} has {found} partitions but write_slots is {spec.partitions};"
                " every instance of one topic_prefix needs the same write_slots"
            )

    async def ensure(self, specs: list[TopicSpec]) -> list[str]:
        existing = await self.topic_names()
        missing = [spec for spec in specs if spec.name not in existing]
        created = await self._create(missing)
        await self._verify([spec for spec in specs if spec.name not in created])
        return created

    async def _create(self, specs: list[TopicSpec]) -> list[str]:
        if not specs:
            return []
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
            for key, wanted in spec.configs.items():
                if actual.get(key) == wanted:
                    continue
                if key in REQUIRED_CONFIGS:
                    raise TopologyMismatch(
                        f"topic {spec.name} has {key}={actual.get(key)!r}, but durable-kafka "
                        f"needs {key}={wanted!r}; fix the topic (kafka-configs --alter) or "
                        "choose another topic_prefix"
                    )
                log.warning(
                    "topic %s has %s=%r (expected %r)", spec.name, key, actual.get(key), wanted
                )

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
            metadata = await asyncio.to_thread(
                self._client.list_topics, topic=name, timeout=self.timeout_s
            )
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

    async def _wait(self, future: concurrent.futures.Future[Any]) -> Any:
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), self.timeout_s + 1)
        except TimeoutError as error:
            raise BrokerUnavailable("the broker did not answer in time") from error


def _code(error: KafkaException) -> int | None:
    inner = error.args[0] if error.args else None
    return inner.code() if isinstance(inner, KafkaError) else None


def _unknown(error: KafkaError | None) -> bool:
    return error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def _translate(error: KafkaException, doing: str, asked: tuple[str, str]) -> Exception:
    """BrokerUnavailable when retrying may help, AccessDenied naming what an ACL refused."""
    inner = error.args[0] if error.args else None
    if isinstance(inner, KafkaError) and (refusal := denied(inner, {"Topic": asked})):
        return AccessDenied(f"{doing}: {refusal}")
    if isinstance(inner, KafkaError) and (inner.retriable() or inner.code() in _TRANSIENT):
        return BrokerUnavailable(f"{doing}: {inner.str()}")
    return TopologyError(f"{doing}: {error}")


_TRANSIENT = {
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError.REQUEST_TIMED_OUT,
}
