"""Where tiering may cut: bytes behind the head and age, from bounded samples."""

from __future__ import annotations

from adapter.tier.meter import SAMPLES, Meter


def _records(first: int, count: int, size: int, at_ms: int) -> list[tuple[int, int, int]]:
    return [(first + i, size, at_ms + i) for i in range(count)]


def test_the_cut_keeps_the_hot_window_in_kafka() -> None:
    meter = Meter.of(0, after_bytes=300)
    meter.observe(_records(0, 10, 100, 1_000), next_offset=10)
    assert meter.cut(300, cutoff_ms=10_000) == 7  # records 7, 8, 9 (300 bytes) stay
    assert meter.cut(900, cutoff_ms=10_000) == 1
    assert meter.cut(1_000, cutoff_ms=10_000) is None  # cutting at the start tiers nothing


def test_nothing_younger_than_the_cutoff_is_cut() -> None:
    meter = Meter.of(0, after_bytes=0)
    meter.observe(_records(0, 10, 100, 1_000), next_offset=10)
    assert meter.cut(0, cutoff_ms=1_004) == 5  # records 0..4 are at or before 1004 ms
    assert meter.cut(0, cutoff_ms=999) is None


def test_gaps_and_markers_between_records_are_skipped() -> None:
    meter = Meter.of(5, after_bytes=0)
    meter.observe([(7, 10, 1), (9, 0, 1), (12, 10, 1)], next_offset=14)
    assert meter.position == 14
    assert [s.offset for s in meter.samples] == [8, 13]  # an empty record makes no boundary
    assert meter.cut(0, cutoff_ms=1) == 13


def test_samples_are_bounded_by_the_window_and_dropped_once_tiered() -> None:
    meter = Meter.of(0, after_bytes=6_400)
    meter.observe(_records(0, 1_000, 100, 0), next_offset=1_000)
    assert len(meter.samples) <= 1_000 * 100 // (6_400 // SAMPLES)
    cut = meter.cut(6_400, cutoff_ms=10_000)
    assert cut is not None
    meter.tiered(cut)
    assert all(sample.offset > cut for sample in meter.samples)
    assert meter.hot_bytes == 100 * (1_000 - cut)


def test_the_lag_is_what_is_due_and_not_tiered() -> None:
    meter = Meter.of(0, after_bytes=300)
    meter.observe(_records(0, 10, 100, 1_000), next_offset=10)
    assert meter.due_bytes(300, cutoff_ms=10_000) == 700
    assert meter.due_bytes(300, cutoff_ms=1_002) == 300  # records 0..2 are old enough
    cut = meter.cut(300, cutoff_ms=10_000)
    assert cut is not None
    meter.tiered(cut)
    assert (meter.due_bytes(300, cutoff_ms=10_000), meter.hot_bytes) == (0, 300)
