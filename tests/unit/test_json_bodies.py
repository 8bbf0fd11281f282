"""The one reader of JSON request bodies: a value, or INVALID_JSON for anything malformed."""

from __future__ import annotations

import pytest

from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.json_bodies import read_json

DEEP = 100_000


def test_a_value_is_read() -> None:
    assert read_json(b' {"before": "-1"} ', "trim body") == {"before": "-1"}


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"{",
        b"{} {}",
        b"\xff",
        b"NaN",
        b'{"at": Infinity}',
        b"[" * DEEP + b"]" * DEEP,
        b'{"a":' * DEEP + b"1" + b"}" * DEEP,
    ],
    ids=["empty", "cut", "two", "not-utf8", "nan", "infinity", "deep-arrays", "deep-objects"],
)
def test_anything_malformed_is_invalid_json(body: bytes) -> None:
    with pytest.raises(ProtocolError) as refused:
        read_json(body, "trim body")
    assert refused.value.code is ErrorCode.INVALID_JSON
    assert str(refused.value).startswith("trim body: ")
