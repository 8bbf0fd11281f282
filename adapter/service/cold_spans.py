"""Where a stream's history lies in the cold tier: its chunks' parts, in offset order.

A stream reads its own records and, before them, those of the streams it was forked from
(`StreamMeta.segments`); each tiered range holds at most one chunk of each. A span is the part
of one such chunk that belongs to the stream's history, so a search over the cold tier walks
(or bisects) one list instead of ranges times segments.
"""

from __future__ import annotations

from dataclasses import dataclass

from adapter.protocol.model import StreamMeta
from adapter.tier.manifest import TierRange


@dataclass(frozen=True)
class ColdSpan:
    tier_range: TierRange
    stream_id: str  # the record id of the segment: the chunk's stream
    start: int
    stop: int
    collected: bool


def cold_spans(ranges: list[TierRange], meta: StreamMeta) -> list[ColdSpan]:
    """The spans of the stream's history in `ranges`, in offset order; a chunk the collector
    dropped is a span too (`collected`), so a search knows it passed messages now gone."""
    spans = []
    for segment in meta.segments():
        for tier_range in ranges:
            chunk = tier_range.chunk_of(segment.stream_id)
            if chunk is None:
                continue
            start = max(segment.start, tier_range.start, chunk.first_offset)
            stop = min(segment.end, tier_range.end, chunk.last_offset + 1)
            if start < stop:
                spans.append(ColdSpan(tier_range, segment.stream_id, start, stop, chunk.collected))
    return sorted(spans, key=lambda span: span.start)
