"""ETags, conditional GETs and Cache-Control values of reads."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest

from adapter.protocol.caching import (
    NO_STORE,
    cache_control_for_read,
    etag,
    if_match_matches,
    if_none_match_matches,
    vary_with,
)

START = "-1"
END = "00000000000000000042"
CACHEABLE = "public, max-age=60, stale-while-revalidate=300"
# RFC 9110 §8.8.3: entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE, etagc = %x21 / %x23-7E / obs-text
_ENTITY_TAG = re.compile(r'"[\x21\x23-\x7e]*"')


@pytest.mark.parametrize(
    ("internal_id", "closed", "expected"),
    [
        ("s1", False, f'"s1:{START}:{END}"'),
        ("s1", True, f'"s1:{START}:{END}:c"'),
        ("b/s@00000000000000000000", False, f'"b/s@00000000000000000000:{START}:{END}"'),
    ],
)
def test_etag(internal_id: str, closed: bool, expected: str) -> None:
    assert etag(internal_id, START, END, closed) == expected


@pytest.mark.parametrize("internal_id", ['a"b', "a b", "a,b", "a%b", "a\\b", "日本", "a\nb"])
def test_etag_escapes_what_an_entity_tag_cannot_hold(internal_id: str) -> None:
    tag = etag(internal_id, START, END, False)
    assert _ENTITY_TAG.fullmatch(tag), tag
    assert if_none_match_matches(tag, tag)


def test_etag_quotes_every_part_as_quote_does() -> None:
    # Parts of only kept characters skip quote(); every other part goes through it.
    safe = "!#$&'()*+/:;<=>?@[]^`{|}"
    for char in [chr(code) for code in range(256)] + ["日", "\u2603"]:
        for part in (char, f"b/s{char}1@0"):
            assert etag(part, part, part, False) == f'"{":".join([quote(part, safe=safe)] * 3)}"'


def test_etag_varies_with_range_and_closure() -> None:
    # Caching and ETag: should return new ETag after data changes; spec §8.1: closure changes it
    tags = {
        etag("s", START, END, False),
        etag("s", START, END, True),
        etag("s", START, "00000000000000000043", False),
        etag("s", END, END, False),
        etag("t", START, END, False),
    }
    assert len(tags) == 5


@pytest.mark.parametrize(
    ("header", "matches"),
    [
        (None, False),
        ("", False),
        ('"s:-1:00000000000000000042"', True),  # should return 304 Not Modified for matching
        ('W/"s:-1:00000000000000000042"', True),
        ('"x", "s:-1:00000000000000000042"', True),
        ('"x",W/"s:-1:00000000000000000042" , "y"', True),
        ("*", True),
        (" * ", True),
        ('"wrong-etag"', False),  # should return 200 for non-matching If-None-Match
        ('"s:-1:00000000000000000042:c"', False),
        ('"s:-1:00000000000000000041"', False),
        ("s:-1:00000000000000000042", False),  # not an entity-tag: unquoted
        ('"x", *', False),
    ],
)
def test_if_none_match(header: str | None, matches: bool) -> None:
    assert if_none_match_matches(header, '"s:-1:00000000000000000042"') is matches


@pytest.mark.parametrize(
    ("has_data", "closed", "seconds_left", "shared", "expected"),
    [
        (True, False, None, True, CACHEABLE),  # a chunk: bytes never change at a position
        (True, True, None, True, CACHEABLE),
        (False, True, None, True, CACHEABLE),  # the EOF of a closed stream is final
        (False, False, None, True, NO_STORE),  # empty at an open tail: data may come any moment
        (True, False, None, False, "private, max-age=60, stale-while-revalidate=300"),
        (True, False, 360, True, CACHEABLE),
        (True, False, 359, True, NO_STORE),  # gone before a cache would let go of it
        (True, True, 0, True, NO_STORE),
    ],
)
def test_cache_control_for_read(
    has_data: bool, closed: bool, seconds_left: int | None, shared: bool, expected: str
) -> None:
    value = cache_control_for_read(
        has_data=has_data, closed=closed, seconds_left=seconds_left, shared=shared
    )
    assert value == expected


@pytest.mark.parametrize(
    ("header", "matches"),
    [('"s:1:2"', True), ("*", True), ('"x", "s:1:2"', True), ('W/"s:1:2"', False), ('"x"', False)],
)
def test_if_match_compares_strongly(header: str, matches: bool) -> None:
    assert if_match_matches(header, '"s:1:2"') is matches


def test_vary_names_each_header_once_beside_those_named_already() -> None:
    assert vary_with(None, "Origin") == "Origin"
    assert vary_with("Authorization", "Origin") == "Authorization, Origin"
    assert vary_with("authorization, origin", "Origin") == "authorization, origin"


def test_a_read_for_one_caller_only_is_private() -> None:
    private = cache_control_for_read(has_data=True, closed=False, shared=False)
    assert private == "private, max-age=60, stale-while-revalidate=300"
