"""Where a fork branches and what it inherits: pure rules over the source's state.

A fork lives in its source's partition, so its history is ranges of that partition: the
source's own history cut at the fork offset (recursively, for a fork of a fork), then the
fork's own records, which always sort after the cut. Every Kafka offset of the partition
falls between two records, so any offset from the source's history start to its tail is a
message boundary of the source.
"""

from __future__ import annotations

from collections.abc import Sequence

from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.headers import is_json
from adapter.protocol.model import Segment, SnapshotPointer, StreamMeta
from adapter.protocol.offsets import encode
from adapter.protocol.snapshots import gone_before


def cut(source: StreamMeta, offset: int | None) -> int | ProtocolError:
    """The offset the fork's inheritance ends at: the source's tail when not given, and
    positions before the source's history begins mean its beginning; or the refusal of one
    past the tail."""
    if offset is None:
        return source.next_offset
    if offset > source.next_offset:
        return ProtocolError(
            ErrorCode.INVALID_OFFSET,
            f"Stream-Fork-Offset {encode(offset)} is past the source's tail "
            f"{encode(source.next_offset)}",
        )
    return max(offset, source.history_start)


def retained(
    source: StreamMeta, snapshot: SnapshotPointer | None, at: int
) -> SnapshotPointer | ProtocolError | None:
    """The snapshot a fork inherits with its source's retention, if the source has one.

    The source's records below its earliest retained offset are replaced by its snapshot or
    trimmed (and Kafka may have dropped them), so a fork from there on starts retained at the
    same offset with the same snapshot, if one is visible, and a fork below it is 410 like a
    read there (the refusal returned)."""
    if at < source.earliest_offset:
        return gone_before(source)
    if source.snapshot_offset is None:
        return None
    if snapshot is None:  # pointer and retention commit together: only a lagging catalog
        return ProtocolError(ErrorCode.UNAVAILABLE, "the source's snapshot is not known yet")
    return snapshot


def inherited(source: StreamMeta, at: int) -> tuple[Segment, ...]:
    """The source's history below `at`, as non-empty ranges of the partition."""
    clipped = (Segment(s.stream_id, s.start, min(s.end, at)) for s in source.segments())
    return tuple(s for s in clipped if s.start < s.end)


def taken(
    content_type: str, following: Sequence[bytes], sub_offset: int
) -> list[bytes] | ProtocolError:
    """The sub-offset prefix a fork copies: the first `sub_offset` bytes of the source's next
    message, or in JSON mode its next `sub_offset` messages; or the refusal of one past them."""
    if sub_offset == 0:
        return []
    if is_json(content_type):
        if sub_offset > len(following):
            return _overshoot(f"{sub_offset} messages", f"{len(following)} follow")
        return list(following[:sub_offset])
    if not following or sub_offset > len(following[0]):
        size = len(following[0]) if following else 0
        return _overshoot(f"{sub_offset} bytes", f"the next message has {size}")
    return [following[0][:sub_offset]]


def _overshoot(wanted: str, there: str) -> ProtocolError:
    return ProtocolError(
        ErrorCode.INVALID_HEADER, f"Stream-Fork-Sub-Offset asks for {wanted}, but {there}"
    )
