"""HTTP caching (spec §8, §5.5, §10.7): ETags, If-None-Match, If-Match, and reads' Cache-Control."""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import quote

NO_STORE: Final = "no-store"
NO_CACHE: Final = "no-cache"
MAX_AGE_S: Final = 60
STALE_WHILE_REVALIDATE_S: Final = 300
# quote() keeps letters, digits and "_.-~"; of the other visible ASCII characters an
# entity-tag may hold, we keep these and escape '"', '%', '\' and ',' (lists split on it).
_ETAG_SAFE: Final = "!#$&'()*+/:;<=>?@[]^`{|}"
_ENTITY_TAG: Final = re.compile(r'(?:W/)?"([^"]*)"')
# A part made only of characters quote() keeps as they are needs no quoting (offsets and most
# stream names): checked in C, where quote() costs ~8 Python calls a part.
_KEPT: Final = re.compile("[A-Za-z0-9_.~" + re.escape("-" + _ETAG_SAFE) + "]*")


def etag(internal_id: str, start: str, end: str, closed: bool) -> str:
    """The strong ETag `"{internal_id}:{start}:{end}"`, with `:c` inside the quotes if `closed`.

    `start` and `end` are the tokens of the range served (`start` as the read named it, e.g.
    `-1`); `closed` says the response carries `Stream-Closed: true`, so that closing a stream
    changes the ETag of the read at its tail even though no data was added (§8.1). Characters
    an entity-tag cannot hold (and `%`, `\\`, `,`) are percent-encoded.
    """
    parts = ":".join(
        part if _KEPT.fullmatch(part) else quote(part, safe=_ETAG_SAFE)
        for part in (internal_id, start, end)
    )
    return f'"{parts}{":c" if closed else ""}"'


def if_none_match_matches(header: str | None, etag: str) -> bool:
    """Whether If-None-Match names `etag`, so a GET answers 304 (RFC 9110 §13.1.2).

    The header is `*` (any current representation matches) or a comma-separated list of
    entity-tags, compared weakly: `W/"x"` matches `"x"`. Anything unparseable matches nothing.
    """
    if header is None:
        return False
    if header.strip() == "*":
        return True
    wanted = _opaque(etag)
    return any(tag == wanted for tag in _ENTITY_TAG.findall(header))


def if_match_matches(header: str, etag: str) -> bool:
    """If-Match (RFC 9110 §13.1.1): `*` or a strong tag equal to the current one."""
    if header.strip() == "*":
        return True
    wanted = _opaque(etag)
    strong = (m[1] for m in _ENTITY_TAG.finditer(header) if not m[0].startswith("W/"))
    return wanted in strong


def cache_control_for_read(
    *, has_data: bool, closed: bool, seconds_left: int | None = None, shared: bool = True
) -> str:
    """Cache-Control of a 200 catch-up or long-poll read (offset=now excepted).

    Bytes never change at a position, so a response with data may be cached as §8.1 advises
    (`max-age=60, stale-while-revalidate=300`): `public` when the answer is the same for every
    caller (`shared`), else `private`, for the caller's own cache only (auth on, the bucket not
    public-read); so may the empty EOF of a `closed` stream. An empty read at
    the tail of an open stream is not stored: a cache would hide new data from everyone
    polling that offset. Nor is the read of a stream that may be gone sooner than a cache
    could keep it (`seconds_left`: its TTL window, or the time until Stream-Expires-At).
    """
    if not (has_data or closed):
        return NO_STORE
    if seconds_left is not None and seconds_left < MAX_AGE_S + STALE_WHILE_REVALIDATE_S:
        return NO_STORE
    scope = "public" if shared else "private"
    return f"{scope}, max-age={MAX_AGE_S}, stale-while-revalidate={STALE_WHILE_REVALIDATE_S}"


def vary_with(vary: str | None, name: str) -> str:
    """A `Vary` value naming `name` as well as what `vary` names already (RFC 9110 §12.5.5)."""
    names = [n.strip() for n in (vary or "").split(",") if n.strip()]
    if name.lower() not in (n.lower() for n in names):
        names.append(name)
    return ", ".join(names)


def _opaque(etag: str) -> str:
    match = _ENTITY_TAG.fullmatch(etag.strip())
    return match[1] if match else etag
