"""Bucket and stream identifiers on the bucketed and the flat `/v1/stream` surfaces."""

from __future__ import annotations

import pytest

from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.identifiers import (
    DEFAULT_BUCKET,
    check_compat_creatable,
    fork_source,
    split_compat_path,
    validate_bucket_id,
    validate_listing_position,
    validate_stream_id,
)


@pytest.mark.parametrize("bucket_id", ["abcd", "my_bucket-1", "_default", "a" * 64, "0000"])
def test_valid_bucket_ids(bucket_id: str) -> None:
    assert validate_bucket_id(bucket_id) == bucket_id


@pytest.mark.parametrize(
    "bucket_id",
    ["", "abc", "a" * 65, "Agents", "a.bcd", "ab cd", "abcd/", "abcd\n", "ünïcode", "abcd\0"],
)
def test_invalid_bucket_ids(bucket_id: str) -> None:
    with pytest.raises(ProtocolError) as excinfo:
        validate_bucket_id(bucket_id)
    assert excinfo.value.code is ErrorCode.INVALID_BUCKET_ID
    assert repr(bucket_id) in excinfo.value.message


@pytest.mark.parametrize(
    "stream_id",
    [
        "a",
        "user-1",
        "a.b",
        ".hidden",
        "trailing.",
        "Streams",
        "streams2",
        "日本語",
        "a b",
        "x" * 117,
    ],
)
def test_valid_stream_ids(stream_id: str) -> None:
    assert validate_stream_id("abcd", stream_id) == stream_id


@pytest.mark.parametrize(
    ("stream_id", "why"),
    [
        ("", "empty"),
        ("a/b", "'/'"),
        ("a\0b", "NUL"),
        (".", "'.'"),
        ("..", "'..'"),
        ("a..b", "'..'"),
        ("...", "'..'"),
        ("streams", "reserved"),
        ("x" * 123, "123 bytes"),
        ("\udc80", "UTF-8"),
    ],
)
def test_invalid_stream_ids(stream_id: str, why: str) -> None:
    with pytest.raises(ProtocolError) as excinfo:
        validate_stream_id("abcd", stream_id)
    assert excinfo.value.code is ErrorCode.INVALID_STREAM_ID
    assert why in excinfo.value.message


def test_stream_id_limit_counts_utf8_bytes() -> None:
    assert validate_stream_id("abcd", "é" * 58) == "é" * 58  # 116 bytes, 121 with "abcd/"
    with pytest.raises(ProtocolError) as excinfo:
        validate_stream_id("abcd", "é" * 59)  # 118 bytes: "abcd/" makes it 123
    assert excinfo.value.code is ErrorCode.INVALID_STREAM_ID


def test_combined_key_limit() -> None:
    assert validate_stream_id("abcd", "s" * 117) == "s" * 117  # "abcd/" + 117 = 122 bytes
    with pytest.raises(ProtocolError) as excinfo:
        validate_stream_id("abcd", "s" * 118)
    assert excinfo.value.code is ErrorCode.INVALID_STREAM_ID
    assert "123 bytes" in excinfo.value.message


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        # The shapes the conformance suite uses: `${name}-${Date.now()}-${base36}`.
        ("create-test-1732000000000", (DEFAULT_BUCKET, "create-test-1732000000000")),
        (
            "fc-byte-exactness-1732000000000-k3j9x0",
            (DEFAULT_BUCKET, "fc-byte-exactness-1732000000000-k3j9x0"),
        ),
        ("manual/a", ("manual", "a")),
        ("__ds/subscriptions/sub-1", ("__ds", "subscriptions/sub-1")),
        ("bucket_1/a/b/c", ("bucket_1", "a/b/c")),
        # A first segment no bucket could have keeps the whole path in `_default`, so every
        # stream of this surface lives in a bucket the bucket API can reach.
        ("Bucket_1/a/b/c", (DEFAULT_BUCKET, "Bucket_1/a/b/c")),
        ("b/streams", (DEFAULT_BUCKET, "b/streams")),
        ("b/a..b", (DEFAULT_BUCKET, "b/a..b")),
        ("healthz/x", (DEFAULT_BUCKET, "healthz/x")),
        ("bad.bucket/x", (DEFAULT_BUCKET, "bad.bucket/x")),
        ("ü/x", (DEFAULT_BUCKET, "ü/x")),
        ("日本語", (DEFAULT_BUCKET, "日本語")),
        ("a b%20c", (DEFAULT_BUCKET, "a b%20c")),
        ("x" * 122, (DEFAULT_BUCKET, "x" * 122)),
        ("b" * 64 + "/" + "s" * 122, ("b" * 64, "s" * 122)),
    ],
)
def test_split_compat_path(path: str, expected: tuple[str, str]) -> None:
    assert split_compat_path(path) == expected


@pytest.mark.parametrize("path", ["/x", "//x"])
def test_compat_path_with_an_empty_first_segment(path: str) -> None:
    with pytest.raises(ProtocolError) as excinfo:
        split_compat_path(path)
    assert excinfo.value.code is ErrorCode.INVALID_STREAM_ID


@pytest.mark.parametrize(
    "path",
    [
        *("", "bucket/", "b/a//c", "b/a/", "b/./a", "b/a/..", "..", ".", "x\0", "x" * 123),
        "b/\udc80",
        # `/{bucket}/streams` lists the bucket: no bucket route could reach such a stream.
        "streams",
        "bucket_1/streams",
    ],
)
def test_compat_path_with_invalid_stream(path: str) -> None:
    with pytest.raises(ProtocolError) as excinfo:
        split_compat_path(path)
    assert excinfo.value.code is ErrorCode.INVALID_STREAM_ID


@pytest.mark.parametrize("bucket_id", ["healthz", "readyz", "metrics"])
def test_paths_the_adapter_serves_are_not_bucket_ids(bucket_id: str) -> None:
    with pytest.raises(ProtocolError) as excinfo:
        validate_bucket_id(bucket_id)
    assert excinfo.value.code is ErrorCode.INVALID_BUCKET_ID
    assert "reserved" in excinfo.value.message


# The templates the router serves below a flat stream (`tests/unit/test_route_needs.py` checks
# the check against the route table itself).
SUB_RESOURCES = ("snapshot", "snapshot/{offset}", "bootstrap", "fence", "trim")


@pytest.mark.parametrize(
    "path",
    [
        "a/snapshot",
        "a/b/bootstrap",
        "shop/doc/snapshot/0000000000000000_0000000000000001",
        "shop/doc/fence",
        "x/trim",
    ],
)
def test_flat_paths_naming_a_sub_resource_cannot_be_created(path: str) -> None:
    with pytest.raises(ProtocolError) as raised:
        check_compat_creatable(path, SUB_RESOURCES)
    assert raised.value.code is ErrorCode.INVALID_STREAM_ID


@pytest.mark.parametrize(
    "path",
    ["snapshot", "bootstrap", "fence", "trim", "snapshot/a", "a/snapshots", "a/fences", "a/trims"],
)
def test_other_flat_paths_can_be_created(path: str) -> None:
    check_compat_creatable(path, SUB_RESOURCES)


@pytest.mark.parametrize(
    ("value", "source"),
    [
        ("/shop/doc", ("shop", "doc")),
        ("https://host/shop/doc%20a", ("shop", "doc a")),
        ("/v1/stream/doc", ("_default", "doc")),
        ("/v1/stream/shop/a/b", ("shop", "a/b")),
    ],
)
def test_a_fork_source_names_a_stream_of_any_bucket(value: str, source: tuple[str, str]) -> None:
    assert fork_source(value) == source


@pytest.mark.parametrize("value", ["/shop", "/shop/a/b", "/Shop/doc"])
def test_a_fork_source_that_names_no_stream_is_refused(value: str) -> None:
    with pytest.raises(ProtocolError):
        fork_source(value)


@pytest.mark.parametrize("value", ["", "a", "é" * 61, "s" * 122, "a/b", "a..b", "\ufffd", "~x"])
def test_a_listing_position_is_what_a_stream_id_could_start_with(value: str) -> None:
    assert validate_listing_position("after", value) == value


@pytest.mark.parametrize(
    ("value", "why"),
    [("s" * 123, "123 bytes"), ("é" * 61 + "a", "123 bytes"), ("a\0b", "NUL"), ("\0", "NUL")],
)
def test_a_listing_position_no_stream_id_could_start_with_is_refused(value: str, why: str) -> None:
    with pytest.raises(ProtocolError) as excinfo:
        validate_listing_position("prefix", value)
    assert excinfo.value.code is ErrorCode.INVALID_QUERY
    assert why in excinfo.value.message
    assert "prefix" in excinfo.value.message
