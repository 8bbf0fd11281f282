"""Bucket and stream identifiers: which names each URL surface accepts, and how paths split.

Two surfaces name streams:

- the bucketed surface, `/{bucket_id}/{stream_id}`, with the rules of the extensions spec §1.1;
- the flat surface of the base protocol, `/v1/stream/{path}`, mapped as Ursula does: a path
  without `/` is a stream of the `_default` bucket, otherwise the first `/` separates the
  bucket from the stream id, which may itself contain `/`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import Final
from urllib.parse import unquote, urlsplit

from adapter.protocol.errors import ErrorCode, ProtocolError

BUCKET_ID_PATTERN: Final = re.compile(r"^[a-z0-9_-]{4,64}$")
# On the flat surface the bucket becomes part of a Kafka topic name: no '.', 1 to 64 characters.
DEFAULT_BUCKET: Final = "_default"
FLAT_PREFIX: Final = "/v1/stream/"  # the base protocol's surface
MAX_STREAM_ID_BYTES: Final = 122
RESERVED_STREAM_IDS: Final = frozenset({"streams"})  # /{bucket_id}/streams lists the bucket
# Single-segment paths the adapter serves itself can never be bucket ids.
RESERVED_BUCKET_IDS: Final = frozenset({"healthz", "readyz", "metrics"})


def validate_bucket_id(bucket_id: str) -> str:
    """The bucket id, if it matches `^[a-z0-9_-]{4,64}$` and is not reserved."""
    if BUCKET_ID_PATTERN.fullmatch(bucket_id) is None:
        raise ProtocolError(
            ErrorCode.INVALID_BUCKET_ID,
            f"bucket id {bucket_id!r} must be 4 to 64 characters of a-z, 0-9, '_' and '-'",
        )
    if bucket_id in RESERVED_BUCKET_IDS:
        raise ProtocolError(ErrorCode.INVALID_BUCKET_ID, f"bucket id {bucket_id!r} is reserved")
    return bucket_id


def validate_stream_id(bucket_id: str, stream_id: str) -> str:
    """The stream id of the bucketed surface `/{bucket_id}/{stream_id}`, if §1.1 allows it.

    Any UTF-8 string of 1 to 122 bytes, with `{bucket_id}/{stream_id}` also at most 122 bytes,
    and without `/` or NUL. The spec says a stream id "MUST NOT contain `..`": we read it
    literally and refuse any `..` substring (so `a..b` too), not only a `..` path segment, as
    the stricter reading can never be wrong. A lone `.` is refused as well: clients and proxies
    normalise it away as a dot-segment, so such a stream could not be addressed. `streams` is
    reserved for the bucket listing. `bucket_id` is expected to be validated already.
    """
    raw = _utf8(stream_id)
    _require(raw, "stream id must not be empty")
    _require(len(raw) <= MAX_STREAM_ID_BYTES, f"stream id is {len(raw)} bytes, over 122")
    combined = len(bucket_id.encode()) + 1 + len(raw)
    _require(
        combined <= MAX_STREAM_ID_BYTES, f"'{{bucket}}/{{stream}}' is {combined} bytes, over 122"
    )
    _require("/" not in stream_id, "stream id must not contain '/'")
    _require("\0" not in stream_id, "stream id must not contain NUL")
    _require(".." not in stream_id, "stream id must not contain '..'")
    _require(stream_id != ".", "stream id must not be '.'")
    _require(stream_id not in RESERVED_STREAM_IDS, f"stream id {stream_id!r} is reserved")
    return stream_id


def validate_listing_position(name: str, value: str) -> str:
    """A listing's `prefix` or `after` (query parameter `name`): what a stream id could start
    with or be, on either surface: at most 122 bytes of UTF-8, no NUL. Anything else could
    match no stream, so it is refused rather than answered with an empty page."""
    if "\0" in value:
        raise ProtocolError(ErrorCode.INVALID_QUERY, f"{name} must not contain NUL")
    size = len(value.encode(errors="surrogatepass"))
    if size > MAX_STREAM_ID_BYTES:
        message = f"{name} is {size} bytes, over the {MAX_STREAM_ID_BYTES} of a stream id"
        raise ProtocolError(ErrorCode.INVALID_QUERY, message)
    return value


# A variable segment of a sub-resource's URL template (`snapshot/{offset}`): any segment fits.
_VARIABLE = re.compile(r"\{[^/{}]+\}")


@functools.lru_cache(maxsize=4096)  # each request asks twice (routing, then the handler)
def split_compat_path(path: str) -> tuple[str, str]:
    """The (bucket id, stream id) a `/v1/stream/{path}` path names (path already URL-decoded).

    Ursula's mapping, kept reachable from the bucket API: when the part before the first `/`
    is a valid bucket id, it is the bucket and the rest the stream; otherwise (no `/`, or a
    first segment no bucket could have) the whole path is a stream of the `_default` bucket.
    The stream id: 1 to 122 UTF-8 bytes, no NUL, no empty, `.` or `..` segment (they
    would be path traversal or an ambiguous spelling of another id), and not `streams`.
    """
    bucket_id, slash, stream_id = path.partition("/")
    if not slash or not _is_bucket_id(bucket_id):
        bucket_id, stream_id = DEFAULT_BUCKET, path
    return bucket_id, _validate_compat_stream_id(stream_id)


def fork_source(value: str) -> tuple[str, str]:
    """(bucket, stream) a `Stream-Forked-From` path (or URL) names, on either surface:
    `/v1/stream/{path}` or `/{bucket}/{stream}`, of any bucket."""
    path = urlsplit(value).path
    if path.startswith(FLAT_PREFIX):
        return split_compat_path(unquote(path.removeprefix(FLAT_PREFIX)))
    parts = path.strip("/").split("/")
    if len(parts) != 2:
        raise ProtocolError(ErrorCode.INVALID_HEADER, f"Stream-Forked-From {value!r}")
    bucket_id = validate_bucket_id(parts[0])
    return bucket_id, validate_stream_id(bucket_id, unquote(parts[1]))


def check_compat_creatable(path: str, sub_resources: Iterable[str]) -> None:
    """Refuse to create a `/v1/stream/{path}` whose URL is a sub-resource of another stream.

    `sub_resources` are the URL templates the router serves below a stream's path
    (`snapshot/{offset}`, `trim`, ...), derived from the route table by the HTTP layer: such a
    URL is routed to that sub-resource's handler, so a stream there could never be read or
    appended to."""
    segments = path.split("/")
    for template in sub_resources:
        _require(
            not _ends_with(segments, template.split("/")),
            f"stream path {path!r} is the URL of another stream's {template!r} on /v1/stream",
        )


def _ends_with(segments: list[str], template: list[str]) -> bool:
    """Whether the path's segments are a stream's path (one segment or more) and then the
    template's."""
    if len(segments) <= len(template):
        return False
    tail = segments[-len(template) :]
    return all(_VARIABLE.fullmatch(t) or t == s for t, s in zip(template, tail, strict=True))


def _is_bucket_id(value: str) -> bool:
    return BUCKET_ID_PATTERN.fullmatch(value) is not None and value not in RESERVED_BUCKET_IDS


def _validate_compat_stream_id(stream_id: str) -> str:
    raw = _utf8(stream_id)
    _require(raw, "stream path must name a stream")
    _require(len(raw) <= MAX_STREAM_ID_BYTES, f"stream id is {len(raw)} bytes, over 122")
    _require("\0" not in stream_id, "stream id must not contain NUL")
    bad = [segment for segment in stream_id.split("/") if segment in ("", ".", "..")]
    _require(not bad, f"stream id {stream_id!r} must not have empty, '.' or '..' segments")
    # `/{bucket}/streams` is the bucket's listing: such a stream could be reached by no
    # bucket route, so the flat surface refuses it as well.
    _require(stream_id not in RESERVED_STREAM_IDS, f"stream id {stream_id!r} is reserved")
    return stream_id


def _utf8(stream_id: str) -> bytes:
    try:
        return stream_id.encode()
    except UnicodeEncodeError:
        raise ProtocolError(ErrorCode.INVALID_STREAM_ID, "stream id is not valid UTF-8") from None


def _require(condition: object, message: str) -> None:
    if not condition:
        raise ProtocolError(ErrorCode.INVALID_STREAM_ID, message)
