"""When a long-lived Kafka client that has not reached Kafka for long is made again."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from adapter.cluster.ownership import unjoined_s
from topology.client_stalls import Stall, unreached


@pytest.mark.parametrize(("session_ms", "limit_s"), [(6_000, 30.0), (10_000, 50.0), (1_000, 30.0)])
def test_the_owners_consumer_is_made_again_after_five_sessions_without_membership_at_least_30s(
    session_ms: int, limit_s: float
) -> None:
    assert unjoined_s(session_ms) == limit_s


def test_only_an_unbroken_stretch_counts() -> None:
    stall = Stall(30.0)
    assert not stall.too_long(True, 0.0)
    assert not stall.too_long(True, 29.0)
    assert not stall.too_long(False, 29.5)  # reached again: the count starts over
    assert not stall.too_long(True, 40.0)
    assert not stall.too_long(True, 70.0)
    assert stall.too_long(True, 70.5)


def test_a_stretch_that_went_on_after_the_client_was_made_again_counts_from_then() -> None:
    stall = Stall(30.0)
    assert not stall.too_long(True, 0.0)
    assert stall.too_long(True, 31.0)
    assert not stall.too_long(True, 32.0)  # the new client's stretch begins here
    assert not stall.too_long(True, 62.0)
    assert stall.too_long(True, 62.5)


@pytest.mark.parametrize(
    ("code", "answered"),
    [
        (KafkaError._TRANSPORT, False),
        (KafkaError._TIMED_OUT, False),
        (KafkaError._ALL_BROKERS_DOWN, False),
        (KafkaError._MSG_TIMED_OUT, False),
        (KafkaError.TOPIC_AUTHORIZATION_FAILED, True),  # a refusal is a broker's answer
        (KafkaError.UNKNOWN_TOPIC_OR_PART, True),
    ],
)
def test_only_errors_no_broker_answered_count_as_unreached(code: int, answered: bool) -> None:
    assert unreached(KafkaException(KafkaError(code))) is not answered
