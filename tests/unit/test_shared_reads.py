"""The chunks shared by live readers: reused while the stream stands still, bounded twice."""

from __future__ import annotations

import dataclasses

from adapter.live.shared_reads import RecentChunks
from adapter.protocol.commands import Chunk
from adapter.protocol.model import StreamMeta

META = StreamMeta(
    bucket_id="bkt1",
    stream_id="s",
    partition=0,
    content_type="text/plain",
    created_at_ms=0,
    start_offset=0,
    next_offset=10,
    last_access_ms=0,
    last_write_at_ms=0,
)


def chunk(size: int, meta: StreamMeta = META) -> Chunk:
    return Chunk(meta, [b"x" * size], 0, meta.next_offset, True)


def test_a_chunk_is_shared_until_the_stream_moves_on() -> None:
    recent = RecentChunks()
    kept = chunk(5)
    recent.put(("bkt1", "s", 0), kept)
    assert recent.get(("bkt1", "s", 0), META) is kept
    assert recent.get(("bkt1", "s", 1), META) is None
    assert recent.get(("bkt1", "s", 0), dataclasses.replace(META, next_offset=12)) is None
    assert recent.get(("bkt1", "s", 0), dataclasses.replace(META, closed=True)) is None


def test_a_renewed_meta_is_served_with_the_kept_messages() -> None:
    recent = RecentChunks()
    recent.put(("bkt1", "s", 0), chunk(5))
    renewed = dataclasses.replace(META, last_access_ms=99)
    served = recent.get(("bkt1", "s", 0), renewed)
    assert served is not None
    assert (served.meta, served.messages) == (renewed, [b"xxxxx"])


def test_bounded_by_count_and_by_bytes_oldest_first() -> None:
    recent = RecentChunks(max_chunks=3, max_bytes=100)
    for position in range(4):
        recent.put(("bkt1", "s", position), chunk(10))
    assert (len(recent), recent.bytes) == (3, 30)
    assert recent.get(("bkt1", "s", 0), META) is None
    recent.get(("bkt1", "s", 1), META)  # used: now the newest
    recent.put(("bkt1", "s", 9), chunk(75))
    assert recent.bytes <= 100
    assert recent.get(("bkt1", "s", 1), META) is not None
    assert recent.get(("bkt1", "s", 2), META) is None


def test_a_chunk_over_the_byte_bound_is_not_kept() -> None:
    recent = RecentChunks(max_bytes=100)
    recent.put(("bkt1", "s", 0), chunk(101))
    assert (len(recent), recent.bytes) == (0, 0)


def test_putting_a_position_again_replaces_it() -> None:
    recent = RecentChunks()
    recent.put(("bkt1", "s", 0), chunk(10))
    recent.put(("bkt1", "s", 0), chunk(20))
    assert (len(recent), recent.bytes) == (1, 20)
