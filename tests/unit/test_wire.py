"""The record format: keys, headers, control records, offset tokens, and who can import it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from topology.wire import (
    CONTENT_TYPE_HEADER,
    CONTROL_HEADER,
    MAX_KAFKA_OFFSET,
    PRODUCER_EPOCH_HEADER,
    PRODUCER_ID_HEADER,
    PRODUCER_SEQ_HEADER,
    STREAM_SEQ_HEADER,
    TOKEN_GROUP_DIGITS,
    ControlEvent,
    ProducerStamp,
    control_headers,
    data_headers,
    decode_token,
    encode_token,
    header_bytes,
    header_value,
    housed_key,
    is_control,
    owner_of_key,
    stream_key,
)


def test_stream_key_is_the_utf8_stream_id() -> None:
    assert stream_key("orders/2024/é") == "orders/2024/é".encode()


def test_data_headers_without_producer() -> None:
    headers = data_headers("application/json")
    assert headers == [(CONTENT_TYPE_HEADER, b"application/json")]
    assert not is_control(headers)


def test_data_headers_with_producer() -> None:
    headers = data_headers("text/plain", ProducerStamp("writer-1", 3, 42))
    assert header_value(headers, CONTENT_TYPE_HEADER) == b"text/plain"
    assert header_value(headers, PRODUCER_ID_HEADER) == b"writer-1"
    assert header_value(headers, PRODUCER_EPOCH_HEADER) == b"3"
    assert header_value(headers, PRODUCER_SEQ_HEADER) == b"42"
    assert header_value(headers, STREAM_SEQ_HEADER) is None
    assert not is_control(headers)


def test_data_headers_with_stream_seq() -> None:
    headers = data_headers("text/plain", stream_seq="0007")
    assert header_value(headers, STREAM_SEQ_HEADER) == b"0007"
    assert header_value(headers, PRODUCER_ID_HEADER) is None


@pytest.mark.parametrize("event", list(ControlEvent))
def test_control_headers_are_recognised(event: ControlEvent) -> None:
    headers = control_headers(event)
    assert is_control(headers)
    value = header_value(headers, CONTROL_HEADER)
    assert value is not None
    assert ControlEvent(value.decode()) is event


def test_control_event_values_are_the_wire_values() -> None:
    assert [event.value for event in ControlEvent] == ["create", "close", "delete"]


def test_headers_as_kafka_clients_return_them() -> None:
    assert not is_control(None)
    assert header_value(None, CONTENT_TYPE_HEADER) is None
    assert is_control({CONTROL_HEADER: b"close", CONTENT_TYPE_HEADER: None})
    assert header_value({CONTENT_TYPE_HEADER: "text/plain"}, CONTENT_TYPE_HEADER) == b"text/plain"
    assert header_value([("a", b"1"), ("a", b"2")], "a") == b"1"  # the first of repeated ones
    assert header_value([("a", b"1")], "b") is None


@pytest.mark.parametrize(
    ("kafka_offset", "token"),
    [
        (0, "0000000000000000_0000000000000000"),
        (42, "0000000000000000_0000000000000042"),
        (10**16 - 1, "0000000000000000_9999999999999999"),
        (10**16, "0000000000000001_0000000000000000"),
        (MAX_KAFKA_OFFSET, "0000000000000922_3372036854775807"),
    ],
)
def test_token_round_trip(kafka_offset: int, token: str) -> None:
    assert encode_token(kafka_offset) == token
    assert decode_token(token) == kafka_offset
    assert len(token) == 2 * TOKEN_GROUP_DIGITS + 1


@pytest.mark.parametrize("kafka_offset", [-1, MAX_KAFKA_OFFSET + 1])
def test_encode_refuses_what_kafka_cannot_hold(kafka_offset: int) -> None:
    with pytest.raises(ValueError, match="outside"):
        encode_token(kafka_offset)


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        ("", "not two groups"),
        ("-1", "not two groups"),
        ("0" * 32, "not two groups"),
        ("0" * 16 + "-" + "0" * 16, "not two groups"),
        ("\u0660" * 16 + "_" + "\u0660" * 16, "not two groups"),  # \d digits, not [0-9]
        ("0000000000000922_3372036854775808", "beyond"),
    ],
)
def test_decode_refuses_what_is_no_token(token: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        decode_token(token)


def _loaded_after(statement: str) -> set[str]:
    """Which of the heavy client libraries a fresh interpreter holds after `statement`."""
    check = f"{statement}; import sys; print(*sorted(m for m in sys.modules if '.' not in m))"
    result = subprocess.run(
        [sys.executable, "-c", check],
        cwd=Path(__file__).parents[2],  # the repo root, so its packages are importable
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return set(result.stdout.split()) & {"confluent_kafka", "aiohttp"}


@pytest.mark.parametrize(
    "statement",
    [
        "import topology.wire",
        "import topology, topology.naming",
        "import spark_streaming, spark_streaming.source",
    ],
)
def test_readers_of_the_format_load_no_kafka_client_or_http_server(statement: str) -> None:
    assert _loaded_after(statement) == set()


def test_a_fork_housed_in_another_buckets_topic_is_keyed_with_its_own_bucket() -> None:
    assert housed_key("shop", "a/b", None) == "a/b"
    assert housed_key("shop", "a/b", "src") == "shop//a/b"
    assert owner_of_key("src", "shop//a/b") == ("shop", "a/b")
    assert owner_of_key("src", "a/b") == ("src", "a/b")  # one of the topic's own streams


def test_header_bytes_count_names_and_values_of_either_shape() -> None:
    assert header_bytes(None) == 0
    assert header_bytes([("ct", b"text"), ("x", None)]) == 2 + 4 + 1
    assert header_bytes({"ct": b"text"}) == 6
