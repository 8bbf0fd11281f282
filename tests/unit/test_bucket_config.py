"""A bucket's configuration: what bodies give, what each refusal is, and ETags that change with
every change of it."""

from __future__ import annotations

from typing import Any

import pytest

from adapter.protocol.bucket_config import (
    BucketConfig,
    bucket_etag,
    check_if_match,
    parse_config,
    reconfigured,
    rendered,
)
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.model import BucketMeta

BUCKET = BucketMeta("logs", "dk.bucket.logs", 3, 1_000)


@pytest.mark.parametrize(
    ("document", "max_age_ms"),
    [
        ({}, None),
        ({"retention": None}, None),
        ({"retention": {}}, None),
        ({"retention": {"max_age_ms": None}}, None),
        ({"retention": {"max_age_ms": 1000}}, 1000),
        ({"retention": {"max_age_ms": 2**53 - 1}}, 2**53 - 1),
    ],
)
def test_a_configuration_reads_its_max_age(document: Any, max_age_ms: int | None) -> None:
    assert parse_config(document) == BucketConfig(max_age_ms)


@pytest.mark.parametrize(
    "document",
    [
        [],
        "retention",
        {"retention": {"max_age_ms": 999}},
        {"retention": {"max_age_ms": 0}},
        {"retention": {"max_age_ms": -5}},
        {"retention": {"max_age_ms": 2**53}},
        {"retention": {"max_age_ms": 1500.5}},
        {"retention": {"max_age_ms": "2000"}},
        {"retention": {"max_age_ms": True}},
        {"retention": {"max_age_ms": 2000, "max_bytes": 1}},
        {"retention": 2000},
        {"retention": {"max_age_ms": 2000}, "partitions": 3},
    ],
)
def test_any_other_body_is_invalid_retention(document: Any) -> None:
    with pytest.raises(ProtocolError) as refused:
        parse_config(document)
    assert refused.value.code is ErrorCode.INVALID_RETENTION


def test_a_configuration_is_shown_as_it_is_sent() -> None:
    assert rendered(BucketConfig(5000)) == {"retention": {"max_age_ms": 5000}}
    assert rendered(BucketConfig()) == {"retention": {"max_age_ms": None}}


def test_every_change_gives_a_new_etag_even_back_to_an_earlier_value() -> None:
    once = reconfigured(BUCKET, BucketConfig(5000))
    back = reconfigured(once, BucketConfig())
    assert (once.retention_max_age_ms, back.retention_max_age_ms) == (5000, None)
    assert len({bucket_etag(BUCKET), bucket_etag(once), bucket_etag(back)}) == 3
    assert (back.topic, back.partitions, back.created_at_ms) == ("dk.bucket.logs", 3, 1_000)
    again = BucketMeta("logs", "dk.bucket.logs", 3, 2_000)  # the bucket deleted and made again
    assert bucket_etag(again) != bucket_etag(BUCKET)


def test_if_match_holds_for_the_current_etag_or_a_star_only() -> None:
    changed = reconfigured(BUCKET, BucketConfig(5000))
    for header in (None, "*", bucket_etag(changed), f'"x", {bucket_etag(changed)}'):
        check_if_match(changed, header)
    for header in (bucket_etag(BUCKET), f"W/{bucket_etag(changed)}", '"nope"'):
        with pytest.raises(ProtocolError) as refused:
            check_if_match(changed, header)
        assert refused.value.code is ErrorCode.PRECONDITION_FAILED
