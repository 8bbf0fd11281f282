"""Mount requests and `[[mounts]]` tables: what is accepted, and the precise refusal of the rest."""

from __future__ import annotations

from typing import Any

import pytest

from adapter.protocol.commands import Append, StreamRef
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.json_mode import SplitBody
from adapter.protocol.mounts import (
    MountSpec,
    append_messages,
    check_mountable,
    parse_configured,
    parse_mount,
)
from topology.wire import ProducerStamp


def test_defaults_and_normalisation() -> None:
    assert parse_mount({"topic": "orders"}) == MountSpec("orders")
    spec = parse_mount(
        {"topic": "a.b-c_1", "content_type": "Application/JSON", "content_type_header": "ct"}
    )
    assert (spec.content_type, spec.content_type_header) == ("application/json", "ct")


@pytest.mark.parametrize(
    ("document", "names"),
    [
        ("orders", "JSON object"),
        ({}, "mount.topic"),
        ({"topic": "bad topic"}, "mount.topic"),
        ({"topic": "t" * 250}, "mount.topic"),
        ({"topic": "t", "content_type": 3}, "mount.content_type"),
        ({"topic": "t", "content_type": "nonsense"}, "mount.content_type"),
        ({"topic": "t", "content_type_header": "a b"}, "mount.content_type_header"),
        ({"topic": "t", "key_encoding": "latin1"}, "mount.key_encoding"),
        ({"topic": "t", "appends": "yes"}, "mount.appends"),
        ({"topic": "t", "other": 1}, "unknown mount field"),
    ],
)
def test_each_bad_field_is_named(document: Any, names: str) -> None:
    with pytest.raises(ProtocolError) as raised:
        parse_mount(document)
    assert raised.value.code is ErrorCode.INVALID_MOUNT
    assert names in raised.value.message


def test_a_configured_mount_names_its_bucket() -> None:
    mount = parse_configured({"bucket": "orders", "topic": "orders-v1"})
    assert (mount.bucket_id, mount.spec.topic) == ("orders", "orders-v1")
    with pytest.raises(ProtocolError):
        parse_configured({"topic": "orders-v1"})
    with pytest.raises(ProtocolError):
        parse_configured({"bucket": "No", "topic": "orders-v1"})


LIMIT = 10_000


def test_a_json_append_to_a_mount_is_held_to_the_message_limit() -> None:
    with pytest.raises(ProtocolError) as raised:
        append_messages("application/json", _append(b"[1, 2, 3]", "application/json"), 2)
    assert raised.value.code is ErrorCode.PAYLOAD_TOO_LARGE


def test_a_json_append_to_a_mount_takes_the_messages_split_at_the_edge() -> None:
    """The HTTP edge splits a JSON body in steps, the event loop turning between them; a
    mounted append must not parse the whole body again in one call (a stall of seconds for a
    compressed bomb), so the edge's messages, or its refusal, are what it writes."""
    split = SplitBody((b"7",))
    json_append = _append(b"[1, 2]", "application/json", split=split)
    assert append_messages("application/json", json_append, LIMIT) == [b"7"]
    refusal = ProtocolError(ErrorCode.PAYLOAD_TOO_LARGE, "more than 2 messages")
    refused = _append(b"[1, 2, 3]", "application/json", split=SplitBody(refusal=refusal))
    with pytest.raises(ProtocolError) as raised:
        append_messages("application/json", refused, LIMIT)
    assert raised.value is refusal


def _append(body: bytes, content_type: str | None = "text/plain", **changes: Any) -> Append:
    fields: dict[str, Any] = {"close": False, "seq": None, "if_match": None} | changes
    return Append(StreamRef("orders", "k"), content_type, body, **fields)


def test_an_append_to_a_mount_is_one_record_per_message() -> None:
    assert parse_mount({"topic": "t", "appends": True}).appends is True
    assert append_messages("text/plain", _append(b"[1, 2]"), LIMIT) == [b"[1, 2]"]
    json_append = _append(b"[1, 2]", "application/json")
    assert append_messages("application/json", json_append, LIMIT) == [b"1", b"2"]
    # Producer headers are kept by the mounted streams' transactional path, not refused.
    append = _append(b"x", producer=ProducerStamp("p", 0, 0))
    assert append_messages("text/plain", append, LIMIT) == [b"x"]


@pytest.mark.parametrize(
    ("append", "code"),
    [
        (_append(b"x", close=True), ErrorCode.INVALID_HEADER),
        (_append(b"x", seq="1"), ErrorCode.INVALID_HEADER),
        (_append(b"x", if_match='"e"'), ErrorCode.INVALID_HEADER),
        (_append(b""), ErrorCode.EMPTY_BODY),
        (_append(b"x", None), ErrorCode.BAD_REQUEST),
        (_append(b"x", "application/json"), ErrorCode.CONTENT_TYPE_MISMATCH),
    ],
)
def test_what_a_mount_cannot_keep_is_refused(append: Append, code: ErrorCode) -> None:
    with pytest.raises(ProtocolError) as raised:
        append_messages("text/plain", append, LIMIT)
    assert raised.value.code is code


PREFIX = "durable-kafka."


@pytest.mark.parametrize(
    ("topic", "allowed", "code"),
    [
        ("orders", (), ErrorCode.TOPIC_NOT_ALLOWED),  # nothing is allowed by default
        ("payments", ("orders", "shared-*"), ErrorCode.TOPIC_NOT_ALLOWED),
        ("durable-kafka.bucket.x", ("*",), ErrorCode.TOPIC_CONFLICT),  # ours: a bucket
        ("durable-kafka.internal.meta", ("*",), ErrorCode.TOPIC_CONFLICT),
        ("other.internal.meta", ("*",), ErrorCode.TOPIC_NOT_ALLOWED),  # another deployment's
        ("otherinternal.owners", ("*",), ErrorCode.TOPIC_NOT_ALLOWED),  # prefix without a dot
        ("__consumer_offsets", ("*", "__*"), ErrorCode.TOPIC_NOT_ALLOWED),
        ("__transaction_state", ("*",), ErrorCode.TOPIC_NOT_ALLOWED),
    ],
)
def test_a_topic_is_mounted_over_http_only_when_allowed(
    topic: str, allowed: tuple[str, ...], code: ErrorCode
) -> None:
    with pytest.raises(ProtocolError) as refused:
        check_mountable(topic, PREFIX, allowed)
    assert refused.value.code is code


@pytest.mark.parametrize(
    ("topic", "allowed"),
    [("orders", ("orders",)), ("shared-orders", ("x", "shared-*")), ("a.b", ("*",))],
)
def test_an_allowed_topic_may_be_mounted(topic: str, allowed: tuple[str, ...]) -> None:
    check_mountable(topic, PREFIX, allowed)
