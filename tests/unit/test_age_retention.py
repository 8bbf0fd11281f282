"""Where age retention cuts a partition, from Kafka's answer to a read by time and the
partition's tiered ranges, and where each stream of it is trimmed to."""

from __future__ import annotations

from adapter.log.reader import TimeFound
from adapter.service.age_retention import Noted, age_cut, trim_point
from adapter.service.time_lookups import CLOCK_SKEW_MS
from adapter.tier.manifest import TierRange

MOMENT = 10_000_000


def _range(start: int, end: int, tiered_at_ms: int) -> TierRange:
    return TierRange("logs", "dk.bucket.logs", 1, 0, start, end, tiered_at_ms, ())


def test_kafka_holding_the_moment_cuts_at_its_first_record_written_then() -> None:
    assert age_cut(TimeFound(40, 0), [], MOMENT) == 40
    assert age_cut(TimeFound(40, 12), [_range(0, 12, MOMENT)], MOMENT) == 40


def test_nothing_written_since_the_moment_cuts_everything_noted() -> None:
    cut = age_cut(TimeFound(None, 7), [], MOMENT)
    assert cut is not None
    assert trim_point(Noted("s", tail=90, earliest=3), cut) == 90


def test_a_moment_in_what_kafka_freed_cuts_at_ranges_tiered_well_before_it() -> None:
    old = MOMENT - CLOCK_SKEW_MS - 1
    ranges = [_range(0, 10, old - 5), _range(10, 20, old), _range(20, 30, MOMENT)]
    assert age_cut(TimeFound(30, 30), ranges, MOMENT) == 20
    # Tiered too close to the moment: its records' times are not known, nothing is cut.
    assert age_cut(TimeFound(30, 30), [_range(0, 30, MOMENT - 1)], MOMENT) is None
    # A range Kafka's answer contradicts (clocks apart): never past the record it named.
    assert age_cut(TimeFound(25, 25), [_range(0, 30, old)], MOMENT) == 25


def test_a_stream_is_trimmed_to_the_cut_or_its_tail_and_never_back() -> None:
    assert trim_point(Noted("s", tail=90, earliest=3), 40) == 40
    assert trim_point(Noted("s", tail=30, earliest=3), 40) == 30
    assert trim_point(Noted("s", tail=90, earliest=40), 40) is None
    assert trim_point(Noted("s", tail=90, earliest=50), 40) is None
