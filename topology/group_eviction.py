"""A static member of a consumer group whose process is gone, removed at once by a child process.

A static member (`group.instance.id`) that dies sends no LeaveGroup, so its partitions stay
assigned to it until its session times out on the coordinator. Kafka's admin API can remove
it by instance id (RemoveMembersFromConsumerGroup, KIP-345), but librdkafka 2.16 and so
confluent-kafka's `AdminClient` do not offer that request. The same effect through a consumer:
join the group with the dead member's `group.instance.id` (the coordinator replaces the dead
member by this one, at once, with its assignment), then unsubscribe, which sends a LeaveGroup
for the instance id: the group rebalances and the live members take the partitions.

A short-lived child process does it, as `topology/group_members.py` describes groups: the
description is an admin request whose dropped connection may abort librdkafka 2.16, and the
borrowed membership must never share a client with the server. The child reads the client's
properties as JSON on its standard input and writes one JSON object: `{"evicted": [ids]}` or
`{"error": "..."}`.

Two peers removing the same owner at once both find it in the group's description; the one
that joins second fences the first (whose poll then meets a fatal error), and only the second
reports the member removed. A peer whose description was taken just before another's join
and leave ended (a window of the join's round trip) still reports it removed too.

The caller must be sure the member's process is gone: a live member so replaced is fenced
and rejoins (see adapter/cluster/ownership.py), which moves its partitions twice.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from confluent_kafka.admin import AdminClient

from topology.child_answers import child_answer
from topology.errors import BrokerUnavailable
from topology.group_members import member_url
from topology.kafka_client import KafkaAccess

POLL_S = 0.1
LEAVE_POLLS = 20  # after unsubscribe(), at most: the revocation, then the LeaveGroup


def evict(
    kafka: KafkaAccess, group: str, topic: str, url: str, session_ms: int, timeout_s: float
) -> list[str]:
    """Remove from `group` every static member whose `client.id` names `url` (the instances
    name themselves by their advertised URL); the instance ids removed. Blocking: run it on a
    thread. BrokerUnavailable when the child gave no answer or failed."""
    config = kafka.config({}, "librdkafka.owners")
    properties = {k: v for k, v in config.items() if isinstance(v, str | int | float | bool)}
    args = [group, topic, url, str(session_ms), str(timeout_s)]
    what = f"evicting {url} from {group}"
    answer = child_answer(__name__, args, properties, 2 * timeout_s, what)
    if "error" in answer:
        raise BrokerUnavailable(f"evicting {url} from {group}: {answer['error']}")
    return [str(member) for member in answer["evicted"]]


def _members_at(properties: dict[str, Any], group: str, url: str, timeout_s: float) -> list[str]:
    """The instance ids of the group's static members named `url` (their `client.id` is the
    URL, then the format level they read)."""
    admin = AdminClient(properties)
    future = admin.describe_consumer_groups([group], request_timeout=timeout_s)[group]
    description = future.result(timeout_s + 1)
    return [
        m.group_instance_id
        for m in description.members
        if member_url(m.client_id) == url and m.group_instance_id
    ]


def _take_and_leave(
    properties: dict[str, Any],
    group: str,
    topic: str,
    member: str,
    url: str,
    session_ms: int,
    timeout_s: float,
) -> bool:
    """Join as `member` (replacing the dead one), then leave the group in its name; False when
    another consumer took the instance id from this one first (a peer removing the same owner
    at the same moment: it is removed, by the other).

    Closing a static member sends no LeaveGroup: it must be served by polls after
    `unsubscribe()`, once every partition assigned (in either round of a cooperative
    rebalance) is revoked, or the group would wait out a session for this member too."""
    held: set[int] = set()
    joined = threading.Event()

    def assigned(_consumer: Consumer, partitions: list[TopicPartition]) -> None:
        held.update(p.partition for p in partitions)
        joined.set()

    def revoked(_consumer: Consumer, partitions: list[TopicPartition]) -> None:
        held.difference_update(p.partition for p in partitions)

    consumer = Consumer(
        properties
        | {
            "group.id": group,
            "group.instance.id": member,
            "client.id": url,  # as the member was: a restarting instance sees its own URL
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": session_ms,
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic], on_assign=assigned, on_revoke=revoked, on_lost=revoked)
        deadline = time.monotonic() + timeout_s
        while not joined.is_set() and time.monotonic() < deadline:
            if _fenced(consumer.poll(POLL_S)):
                return False
        try:
            consumer.unsubscribe()
        except KafkaException as error:
            if error.args[0].code() == KafkaError._FATAL:  # fenced since the last poll
                return False
            raise
        for _ in range(LEAVE_POLLS):
            if _fenced(consumer.poll(POLL_S)):
                return False
            if not held:
                break
        return not _fenced(consumer.poll(POLL_S))  # sends the LeaveGroup
    finally:
        consumer.close()


def _fenced(polled: Message | None) -> bool:
    """Whether a poll met a fatal error (`_FATAL`: a poll's error does not say `fatal()`): for
    a consumer of the classic group protocol, the only one there is, its `group.instance.id`
    taken by another consumer (the coordinator fenced it)."""
    error = None if polled is None else polled.error()
    return error is not None and error.code() == KafkaError._FATAL


def _evicted(
    group: str, topic: str, url: str, session_ms: int, timeout_s: float, properties: dict[str, Any]
) -> dict[str, object]:
    try:
        members = _members_at(properties, group, url, timeout_s)
        removed = [
            member
            for member in members
            if _take_and_leave(properties, group, topic, member, url, session_ms, timeout_s)
        ]
    except (KafkaException, TimeoutError) as error:
        return {"error": str(error)}
    return {"evicted": removed}


def main() -> None:
    group, topic, url, session_ms, timeout_s = sys.argv[1:6]
    answer = _evicted(group, topic, url, int(session_ms), float(timeout_s), json.load(sys.stdin))
    sys.stdout.write(json.dumps(answer))
    sys.stdout.flush()
    os._exit(0)  # tearing the clients down with a request pending is what may abort


if __name__ == "__main__":
    main()
