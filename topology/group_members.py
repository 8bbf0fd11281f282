"""The members of a consumer group, described by a short-lived child process.

Describing a group is an admin request to the group's coordinator, and librdkafka 2.16 aborts
the whole process (`rd_kafka_enq_once_del_source_return: Assertion 'eonce->refcnt > 0'`) when
the coordinator's connection drops under such a request, or under one that timed out and is
still pending inside the client. The checks that need a group's members run at start only;
each asks a child process, so an abort costs that one answer, never the server.

The child reads the client's properties as JSON on its standard input (secrets never appear
in a command line) and writes one JSON object: `{"members": [...]}` or `{"error": {...}}`.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass
from typing import Final

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from topology.child_answers import child_answer
from topology.kafka_client import KafkaAccess

# What an owners' group member's `client.id` carries after its advertised URL: the newest level
# it reads (`adapter/state/format_gate.py`). A member without it predates levels.
READS_MARK: Final = "#reads="


def member_url(client: str) -> str:
    """The advertised URL in an owners' group member's `client.id` (with or without a level)."""
    return client.partition(READS_MARK)[0]


@dataclass(frozen=True)
class Member:
    group_instance_id: str | None
    client_id: str


def describe(kafka: KafkaAccess, group: str, timeout_s: float) -> list[Member]:
    """The group's members (none when it does not exist). Blocking: run it on a thread.

    KafkaException for what the broker answered (an ACL refusal, a timeout), BrokerUnavailable
    when the child ended without an answer."""
    config = kafka.clients.fresh(kafka.config({}, "librdkafka.group_members"))
    # Plain values only (no callbacks), and no statistics: the child has nowhere to send them.
    properties = {
        k: v
        for k, v in config.items()
        if isinstance(v, str | int | float | bool) and k != "statistics.interval.ms"
    }
    what = f"describing group {group}"
    answer = child_answer(__name__, [group, str(timeout_s)], properties, timeout_s, what)
    if "error" in answer:
        said = answer["error"]
        raise KafkaException(KafkaError(said["code"], said["reason"], retriable=said["retriable"]))
    return [Member(**member) for member in answer["members"]]


def _described(
    group: str, timeout_s: float, properties: dict[str, str | int | float | bool]
) -> dict[str, object]:
    admin = AdminClient(properties)
    future = admin.describe_consumer_groups([group], request_timeout=timeout_s)[group]
    try:
        description = future.result(timeout_s + 1)
    except KafkaException as failure:
        inner = failure.args[0]
        return {
            "error": {"code": inner.code(), "reason": inner.str(), "retriable": inner.retriable()}
        }
    except TimeoutError:
        return {"error": {"code": KafkaError._TIMED_OUT, "reason": "timed out", "retriable": True}}
    members = [Member(m.group_instance_id, m.client_id) for m in description.members]
    return {"members": [asdict(member) for member in members]}


def main() -> None:
    group, timeout_s = sys.argv[1], float(sys.argv[2])
    answer = _described(group, timeout_s, json.load(sys.stdin))
    sys.stdout.write(json.dumps(answer))
    sys.stdout.flush()
    os._exit(0)  # tearing the client down with a request pending is what may abort


if __name__ == "__main__":
    main()
