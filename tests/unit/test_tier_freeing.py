"""Where Kafka may free a partition: the end of its tiered ranges, or further where nothing
is needed."""

from __future__ import annotations

from adapter.tier.freeing import free_to, to_free
from adapter.tier.manifest import Place, TierChunk, TierIndex, TierRange

PLACE = Place("p.bucket.b", 7, 0)


def _range(start: int, end: int) -> TierRange:
    chunk = TierChunk("s", f"tier/{start}", start, end - 1, 1, 1, 1)
    return TierRange("b", PLACE.topic, PLACE.epoch_ms, PLACE.partition, start, end, 0, (chunk,))


def test_kafka_frees_up_to_the_tiered_end_or_further_where_nothing_is_needed() -> None:
    index = TierIndex()
    assert free_to(index, PLACE) is None  # nothing tiered: nothing goes
    assert free_to(index, PLACE, unneeded_below=5) == 5
    index.put(_range(0, 10))
    index.put(_range(10, 25))
    assert free_to(index, PLACE) == 25
    assert free_to(index, PLACE, unneeded_below=20) == 25
    assert free_to(index, PLACE, unneeded_below=40) == 40
    assert free_to(index, Place(PLACE.topic, 8, 0)) is None  # another incarnation
    assert to_free(index, PLACE, log_start=10) == 25
    assert to_free(index, PLACE, log_start=25) is None  # already freed
