"""A bucket's listing (`GET /{bucket}/streams`) as the model checks it: every page followed
from the first (`after` the previous page's `next_cursor`), each page's shape checked, then its
entries compared with the streams the model holds (explanation/protocol-choices.md,
"Listings"): exactly the bucket's live streams with the prefix, in code-point order, no
soft-deleted or deleted one; each entry open, of its stream's content type, created while
its creation was asked, and at its stream's tail."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from tests.model.deployment import Instance
from tests.model.reference import Stream

MAX_PAGES = 100  # the model's buckets hold a few streams: a page of one each is far fewer
# The page sizes a listing asks for: the default (None: no `limit`, 1000) first, hypothesis's
# simplest; then pages of one or two streams, so that every stream of a bucket is paged over.
PAGE_SIZES: tuple[int | None, ...] = (None, 1, 2)


@dataclass(frozen=True)
class Listing:
    """The entries of every page in order, or what is wrong with the first wrong page."""

    entries: list[dict[str, Any]]
    pages: int
    problem: str | None = None


def query(prefix: str, limit: int | None, after: str | None) -> str:
    asked = {"prefix": prefix} if prefix else {}
    if limit is not None:
        asked["limit"] = str(limit)
    if after is not None:
        asked["after"] = after
    return urlencode(asked)


def follow(via: Instance, bucket: str, prefix: str, limit: int | None) -> Listing:
    """Every page of the bucket's listing through `via`."""
    entries: list[dict[str, Any]] = []
    after: str | None = None
    for page in range(1, MAX_PAGES + 1):
        reply = via.request("GET", f"/{bucket}/streams?{query(prefix, limit, after)}")
        if reply.status != 200:
            return Listing(entries, page, f"page {page}: {reply.status} {reply.body[:200]!r}")
        body = json.loads(reply.body)
        problem = page_problem(body, bucket, prefix, limit)
        if problem is not None:
            return Listing(entries, page, f"page {page} (after {after!r}): {problem}")
        entries += body["streams"]
        if not body["has_more"]:
            return Listing(entries, page)
        after = body["next_cursor"]
    return Listing(entries, MAX_PAGES, f"no last page after {MAX_PAGES}")


def page_problem(body: dict[str, Any], bucket: str, prefix: str, limit: int | None) -> str | None:
    """What is wrong with one page's shape: its bucket and prefix, its count, at most `limit`
    streams, and a cursor (its last stream's id) exactly when more follow."""
    streams = body["streams"]
    ids = [entry["stream_id"] for entry in streams]
    cursor = ids[-1] if body["has_more"] and ids else None
    if (body["bucket_id"], body["prefix"]) != (bucket, prefix):
        return f"bucket {body['bucket_id']!r} prefix {body['prefix']!r}"
    if body["stream_count"] != len(streams) or len(streams) > (limit or 1000):
        return f"{len(streams)} streams, stream_count {body['stream_count']}, limit {limit}"
    if body["has_more"] and (body["next_cursor"] != cursor or len(streams) != limit):
        return f"has_more with {len(streams)} streams and cursor {body['next_cursor']!r}"
    if not body["has_more"] and body["next_cursor"] is not None:
        return f"no more, but cursor {body['next_cursor']!r}"
    return None


def membership_problem(entries: list[dict[str, Any]], streams: list[Stream]) -> str | None:
    """Whether the entries name exactly `streams`, in code-point order, each the incarnation
    the model holds (created while its creation was asked: not one deleted before)."""
    listed = [entry["stream_id"] for entry in entries]
    want = sorted(stream.name for stream in streams)
    if listed != want:
        return f"streams {listed}, the model says {want}"
    for entry, stream in zip(entries, sorted(streams, key=lambda s: s.name), strict=True):
        sent, acked = stream.created_within
        if not math.floor(sent) <= entry["created_at_ms"] <= math.ceil(acked):
            return f"{stream.name} created at {entry['created_at_ms']}, not in [{sent}, {acked}]"
    return None


def fields_problem(entries: list[dict[str, Any]], streams: list[Stream]) -> str | None:
    """Whether each entry (of the incarnation the model holds) says what the model knows of
    its stream: open, its content type, and its tail."""
    for entry, stream in zip(entries, sorted(streams, key=lambda s: s.name), strict=True):
        content_type = "application/json" if stream.is_json else "text/plain"
        shown = (entry["status"], entry["content_type"], entry["tail_offset"])
        if shown != ("Open", content_type, stream.tail):
            want = ("Open", content_type, stream.tail)
            return f"{stream.name}: (status, content type, tail) {shown}, the model says {want}"
    return None


def problems(
    via: Instance, bucket: str, prefix: str, limit: int | None, streams: list[Stream]
) -> tuple[str | None, str | None]:
    """What is wrong with the listing through `via`, every page followed, against `streams`
    (the live streams of the bucket with `prefix`): with the pages or the streams they name,
    and else with what they say of them."""
    got = follow(via, bucket, prefix, limit)
    named = got.problem or membership_problem(got.entries, streams)
    return named, None if named else fields_problem(got.entries, streams)
