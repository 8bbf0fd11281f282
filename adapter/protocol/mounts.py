"""Mounts: an existing Kafka topic served as a bucket, one stream per record key.

What a mount request (`PUT /{bucket}` with `{"mount": {...}}`, or a `[[mounts]]` table of the
config file) may say, checked here without I/O; the service checks that the topic exists.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Final

from adapter.protocol import json_mode
from adapter.protocol.commands import Append
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.headers import content_types_match, is_json, normalize_content_type
from adapter.protocol.identifiers import validate_bucket_id

# Kafka's rule for topic names.
TOPIC_NAME: Final = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
# A header name: HTTP token characters (Kafka allows any string; we keep to what is sane).
HEADER_NAME: Final = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$")
KEY_ENCODINGS: Final = ("utf8",)
DEFAULT_CONTENT_TYPE: Final = "application/octet-stream"
# Never mounted over HTTP, whatever `mount_topics` allows: the internal topics of every
# deployment on the cluster (`{prefix}internal.{which}`, whatever its prefix) and Kafka's own
# (`__consumer_offsets`, `__transaction_state`, ...). A `[[mounts]]` table may still name one.
NEVER_MOUNTED: Final = ("*internal.*", "__*")
FIELDS: Final = frozenset(
    {"topic", "content_type", "content_type_header", "key_encoding", "appends"}
)


@dataclass(frozen=True)
class MountSpec:
    """A mount as asked for: which topic, and how its records become messages."""

    topic: str
    content_type: str = DEFAULT_CONTENT_TYPE
    content_type_header: str | None = None
    key_encoding: str = "utf8"
    appends: bool = False


def parse_mount(document: Any) -> MountSpec:
    """The mount a JSON object (or TOML table) describes, or INVALID_MOUNT naming the field."""
    if not isinstance(document, dict):
        raise invalid("a mount must be a JSON object")
    unknown = sorted(set(document) - FIELDS)
    if unknown:
        raise invalid(f"unknown mount field(s) {unknown}; known: {sorted(FIELDS)}")
    topic = document.get("topic")
    if not isinstance(topic, str) or TOPIC_NAME.fullmatch(topic) is None:
        raise invalid("mount.topic must be a Kafka topic name: 1 to 249 of [a-zA-Z0-9._-]")
    return MountSpec(
        topic=topic,
        content_type=_content_type(document.get("content_type", DEFAULT_CONTENT_TYPE)),
        content_type_header=_header(document.get("content_type_header")),
        key_encoding=_key_encoding(document.get("key_encoding", "utf8")),
        appends=_appends(document.get("appends", False)),
    )


def check_mountable(topic: str, prefix: str, allowed: tuple[str, ...]) -> None:
    """Refuse a mount over HTTP of `topic` unless an operator allowed it: 409 for a topic
    under our own `prefix` (a bucket's or our internals), 403 `topic_not_allowed` for any
    deployment's internals, Kafka's own topics, and a topic no `allowed` glob matches."""
    if topic.startswith(prefix):
        raise ProtocolError(
            ErrorCode.TOPIC_CONFLICT,
            f"topic {topic!r} has durable-kafka's prefix: serve it as a bucket",
        )
    if any(fnmatchcase(topic, pattern) for pattern in NEVER_MOUNTED):
        raise ProtocolError(
            ErrorCode.TOPIC_NOT_ALLOWED, f"topic {topic!r} is internal: it is never mounted"
        )
    if not any(fnmatchcase(topic, pattern) for pattern in allowed):
        raise ProtocolError(
            ErrorCode.TOPIC_NOT_ALLOWED,
            f"topic {topic!r} is not one the operator allows to mount (mount_topics)",
        )


def _content_type(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise invalid("mount.content_type must be a media type such as 'application/json'")
    try:
        normalized = normalize_content_type(value)
    except ProtocolError:
        raise invalid(f"mount.content_type {value!r} is not a media type") from None
    assert normalized is not None  # not blank, checked above
    return normalized


def _header(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or HEADER_NAME.fullmatch(value) is None:
        raise invalid("mount.content_type_header must be a header name (token characters)")
    return value


def _key_encoding(value: Any) -> str:
    if value not in KEY_ENCODINGS:
        raise invalid(f"mount.key_encoding must be one of {list(KEY_ENCODINGS)}")
    return str(value)


def _appends(value: Any) -> bool:
    if not isinstance(value, bool):
        raise invalid("mount.appends must be true or false")
    return value


def invalid(message: str) -> ProtocolError:
    return ProtocolError(ErrorCode.INVALID_MOUNT, message)


@dataclass(frozen=True)
class ConfiguredMount:
    """A `[[mounts]]` table: a mount present from start, held by the config, not the registry."""

    bucket_id: str
    spec: MountSpec


def parse_configured(document: Any) -> ConfiguredMount:
    """A `[[mounts]]` table: `bucket` plus the fields of a mount request."""
    if not isinstance(document, dict) or not isinstance(document.get("bucket"), str):
        raise invalid("a [[mounts]] table needs bucket = '<bucket id>'")
    fields = {name: value for name, value in document.items() if name != "bucket"}
    return ConfiguredMount(validate_bucket_id(document["bucket"]), parse_mount(fields))


def append_messages(content_type: str, command: Append, limit: int) -> list[bytes]:
    """The record values an append to a writable mount produces, one per message.

    A mount's records are plain: no closure, no `Stream-Seq`, `If-Match` or fencing token
    (they need a stream state of ours), each refused precisely. Idempotent-producer headers
    are kept by the caller (`service/mounted_streams.py`).
    """
    unsupported = [
        name
        for name, given in (
            ("Stream-Closed", command.close),
            ("Stream-Seq", command.seq is not None),
            ("If-Match", command.if_match is not None),
            ("Stream-Fencing-Token", command.fencing_token is not None),
        )
        if given
    ]
    if unsupported:
        raise ProtocolError(
            ErrorCode.INVALID_HEADER, f"{', '.join(unsupported)}: not supported on a mounted topic"
        )
    if not command.body:
        raise ProtocolError(ErrorCode.EMPTY_BODY, "an append needs a body")
    if command.content_type is None:
        raise ProtocolError(ErrorCode.BAD_REQUEST, "an append needs a Content-Type")
    if not content_types_match(content_type, command.content_type):
        raise ProtocolError(
            ErrorCode.CONTENT_TYPE_MISMATCH,
            f"the stream is {content_type}, the append {command.content_type}",
        )
    if is_json(content_type):
        if command.split is not None:  # split in steps at the edge: not parsed whole again
            return command.split.result()
        return json_mode.split_append(command.body, limit)
    return [command.body]
