"""Record keys of a mounted topic as stream ids: plain when valid, else `~` + base64url."""

from __future__ import annotations

import pytest

from adapter.protocol.mount_keys import key_of, media_type, stream_id_of
from topology.mount_positions import position, split


@pytest.mark.parametrize("key", [b"order-1", "\u00e9t\u00e9".encode(), b"a b", b"x" * 100])
def test_a_key_that_is_a_valid_id_is_its_own_id(key: bytes) -> None:
    assert stream_id_of("bucket", key) == key.decode()
    assert key_of(key.decode()) == key


@pytest.mark.parametrize(
    "key", [b"a/b", b"~x", b"streams", b"..", b".", b"", b"\xff\x00", b"nul\x00", b"a..b"]
)
def test_any_other_key_is_escaped_and_reversible(key: bytes) -> None:
    stream_id = stream_id_of("bucket", key)
    assert stream_id is not None
    assert stream_id.startswith("~")
    assert "/" not in stream_id
    assert "=" not in stream_id
    assert key_of(stream_id) == key


def test_a_key_too_long_for_any_id_is_not_addressable() -> None:
    assert stream_id_of("bucket", b"\xff" * 100) is None
    assert stream_id_of("bucket", b"y" * 118) is None  # bucket/ + 118 bytes is over 122


def test_only_the_canonical_escape_names_a_key() -> None:
    assert key_of("~YQ") == b"a"
    assert key_of("~YR") is None  # non-zero padding bits: another spelling of "a"
    assert key_of("~!!") is None


def test_positions_sort_by_partition_then_offset() -> None:
    assert split(position(2, 41)) == (2, 41)
    assert position(0, 10**15) < position(1, 0) < position(1, 1)


def test_media_types_from_headers() -> None:
    assert media_type(b"Application/JSON") == "application/json"
    assert media_type(b"not a type") is None
