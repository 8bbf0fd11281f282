"""Listing stream ids in pages: the ids with a prefix, after a cursor, from a sorted list.

Both the catalog (`adapter/state/`) and a mounted topic's key index (`adapter/log/`) list their
ids this way; it lives here, below both, because the protocol layer sits above them.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence


def ids_after(sorted_ids: Sequence[str], prefix: str, after: str | None) -> Iterator[str]:
    """The ids of `sorted_ids` (code point order, which is UTF-8 byte order) that start with
    `prefix`, strictly after `after`: one bisect to the first candidate, then a walk that stops
    at the first id without the prefix (ids sharing a prefix are contiguous once sorted)."""
    if after is not None and after >= prefix:
        index = bisect.bisect_right(sorted_ids, after)
    else:
        index = bisect.bisect_left(sorted_ids, prefix)
    for stream_id in sorted_ids[index:]:
        if not stream_id.startswith(prefix):
            return
        yield stream_id
