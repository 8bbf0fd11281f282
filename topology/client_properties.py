"""The operator's Kafka client properties: which keys are refused, which values are secrets,
and how a Java-style client.properties file is read. Standard library and `javaproperties`
only: the Spark reader uses it too."""

from __future__ import annotations

import re
from collections.abc import Mapping

import javaproperties

# What the server sets on some client: an operator's value would break a guarantee (transactions,
# read_committed, groups never joined) or a limit derived from other settings. Aliases too.
OWNED = frozenset(
    {
        "bootstrap.servers",
        "metadata.broker.list",
        "transactional.id",
        "transaction.timeout.ms",
        "enable.idempotence",
        "acks",
        "request.required.acks",
        "isolation.level",
        "group.id",
        "group.instance.id",
        "client.id",
        "enable.auto.commit",
        "enable.auto.offset.store",
        "auto.offset.reset",
        "enable.partition.eof",
        "partition.assignment.strategy",
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "linger.ms",
        "partitioner",
        "queue.buffering.max.messages",
        "queue.buffering.max.kbytes",
        "message.max.bytes",
        "delivery.timeout.ms",
        "fetch.wait.max.ms",
        "fetch.max.bytes",
        "max.partition.fetch.bytes",
        "fetch.queue.backoff.ms",
        "queued.min.messages",
        "queued.max.messages.kbytes",
        "statistics.interval.ms",  # `kafka_statistics_interval_ms`: the metrics read them
        # Callbacks: set in code, never from a file.
        "logger",
        "error_cb",
        "stats_cb",
        "throttle_cb",
        "oauth_cb",
        "on_commit",
        "on_delivery",
    }
)
# A property whose value is a credential: its value is never logged, printed or answered.
_SECRET = re.compile(r"password|secret|token|jaas|key\.pem|oauthbearer\.config|private", re.I)
REDACTED = "[redacted]"


class ClientPropertiesError(ValueError):
    """The client properties cannot be used; the message names the keys, never a value."""


def is_secret(key: str) -> bool:
    return bool(_SECRET.search(key))


def redacted(properties: Mapping[str, str]) -> dict[str, str]:
    """The properties with every secret's value replaced, for printing."""
    return {key: REDACTED if is_secret(key) else value for key, value in properties.items()}


def refused(properties: Mapping[str, object]) -> list[str]:
    """The keys the server owns, sorted."""
    return sorted(key for key in properties if key in OWNED)


def checked(properties: Mapping[str, object], origin: str) -> dict[str, str]:
    """Properties as librdkafka strings; ClientPropertiesError naming refused or bad keys."""
    if owned := refused(properties):
        raise ClientPropertiesError(
            f"{origin}: refused, the server sets these itself: {', '.join(owned)}"
        )
    bad = sorted(k for k, v in properties.items() if not isinstance(v, str | int | bool))
    if bad:
        raise ClientPropertiesError(f"{origin}: {', '.join(bad)} must be strings or numbers")
    return {key: _text(value) for key, value in properties.items()}


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def read_properties_file(path: str) -> dict[str, str]:
    """A Java-style client.properties (`key=value`, `#`/`!` comments, `\\` continuations)."""
    try:
        with open(path, encoding="utf-8") as stream:
            return dict(javaproperties.load(stream))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        problem = f"cannot read client properties file {path}: {type(error).__name__}"
        raise ClientPropertiesError(problem) from None  # its text may quote a secret
