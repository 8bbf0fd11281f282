"""Content codings: which request codings are decoded, which answer coding is chosen."""

from __future__ import annotations

import pytest

from adapter.protocol.codings import accepts, request_coding, response_coding
from adapter.protocol.errors import ErrorCode, ProtocolError


@pytest.mark.parametrize(
    ("values", "coding"),
    [
        ([], None),
        ([""], None),
        (["identity"], None),
        ([" IDENTITY "], None),
        (["identity", ""], None),
        (["gzip"], "gzip"),
        (["GZIP"], "gzip"),
        (["x-gzip"], "gzip"),
        (["zstd"], "zstd"),
        (["identity, zstd"], "zstd"),
        (["identity", "gzip"], "gzip"),
    ],
)
def test_identity_gzip_and_zstd_are_taken(values: list[str], coding: str | None) -> None:
    assert request_coding(values) == coding


@pytest.mark.parametrize(
    "values", [["deflate"], ["br"], ["compress"], ["bogus"], ["gzip, zstd"], ["gzip", "gzip"]]
)
def test_any_other_coding_or_two_stacked_is_415(values: list[str]) -> None:
    with pytest.raises(ProtocolError) as excinfo:
        request_coding(values)
    assert excinfo.value.code is ErrorCode.UNSUPPORTED_MEDIA_TYPE
    assert "Content-Encoding" in excinfo.value.message


@pytest.mark.parametrize(
    ("header", "coding"),
    [
        (None, None),
        ("", None),
        ("identity", None),
        ("br, deflate", None),
        ("gzip", "gzip"),
        ("x-gzip", "gzip"),
        ("gzip, deflate, br, zstd", "zstd"),  # a tie: ours is zstd
        ("zstd;q=0.5, gzip", "gzip"),
        ("GZIP;Q=0.9, zstd;q=0.1", "gzip"),
        ("zstd;q=0, gzip;q=0", None),
        ("*", "zstd"),
        ("*;q=0.5, gzip", "gzip"),
        ("*, zstd;q=0", "gzip"),
        ("gzip;q=bogus", None),
        ("gzip;q=0.001", "gzip"),
    ],
)
def test_the_answer_is_coded_as_the_client_weighs_highest(
    header: str | None, coding: str | None
) -> None:
    assert response_coding(header) == coding


@pytest.mark.parametrize(
    ("header", "taken"),
    [(None, False), ("zstd", False), ("gzip;q=0", False), ("*", True), ("br, GZIP", True)],
)
def test_whether_gzip_is_taken(header: str | None, taken: bool) -> None:
    assert accepts(header, "gzip") is taken
