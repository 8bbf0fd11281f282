"""Long-lived Kafka clients made again when they have not reached Kafka for long.

librdkafka 2.16 can lose every broker for good (confluentinc/librdkafka#5301): a Metadata
response listing no broker, which a lone broker sends while it shuts down, decommissions the
brokers the client knew, and when it comes just as the connection drops no re-bootstrap starts.
The client then logs `no broker available` for ever, with the restarted broker ready (seen with
the owners' consumer: `adapter/cluster/ownership.py`). Nothing the client says tells this apart
from an outage, so each long-lived client watches what shows it reaches Kafka (a member id, a
view found current, a metadata answer) and is made again from the bootstrap servers once that
has failed for a stretch. During a real outage this repeats once a stretch, harmlessly: the new
client resumes where the old one stopped.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

# What a failed call says when no broker answered it (any other error is a broker's answer).
UNREACHED = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._MSG_TIMED_OUT,
    }
)
STALLED_S = 30.0  # unreached this long: the client is made again (unless its owner says more)


class Stall:
    """How long a client has gone without reaching Kafka, and whether for longer than
    `limit_s`: `too_long` is true once per unbroken stretch longer than that, and a new stretch
    starts after it."""

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self.since: float | None = None

    def too_long(self, stalled: bool, now: float) -> bool:
        if not stalled:
            self.since = None
            return False
        if self.since is None:
            self.since = now
            return False
        if now - self.since <= self.limit_s:
            return False
        self.since = None
        return True


def unreached(error: KafkaException) -> bool:
    """Whether `error` says that no broker answered."""
    inner = error.args[0] if error.args else None
    return isinstance(inner, KafkaError) and inner.code() in UNREACHED
