"""How far behind its head each position of a partition is, to find where tiering may cut.

Kafka gives offsets, not byte positions, so the tier worker measures: it reads each new record
once (`observe`) and keeps a bounded list of samples (a record boundary, the bytes before it,
the newest timestamp before it). A cut is the last sample with at least `after_bytes` behind
the head and nothing younger than the age cutoff before it. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

# Samples kept per hot window: a cut lands within 1/SAMPLES of the window of the ideal one.
SAMPLES = 64


@dataclass(frozen=True)
class Sample:
    offset: int  # a record boundary: every record below it is counted in `before`
    before: int  # bytes of values from the meter's start to `offset`
    newest_ms: int  # the newest record timestamp below `offset`


@dataclass
class Meter:
    """The measure of one partition from `start` on."""

    start: int
    step: int  # bytes between samples
    position: int = -1  # every record below it has been observed
    total: int = 0
    base: int = 0  # bytes observed below the last tiered boundary
    newest_ms: int = 0
    samples: deque[Sample] = field(default_factory=deque)

    def __post_init__(self) -> None:
        self.position = max(self.position, self.start)

    @classmethod
    def of(cls, start: int, after_bytes: int) -> Meter:
        return cls(start, max(1, after_bytes // SAMPLES))

    def observe(self, records: list[tuple[int, int, int]], next_offset: int) -> None:
        """Records (offset, value bytes, timestamp) read in order, then the scan's end."""
        last = self.samples[-1].before if self.samples else 0
        for offset, size, timestamp_ms in records:
            self.total += size
            self.newest_ms = max(self.newest_ms, timestamp_ms)
            if size and self.total - last >= self.step:
                self.samples.append(Sample(offset + 1, self.total, self.newest_ms))
                last = self.total
        self.position = max(self.position, next_offset)

    def cut(self, after_bytes: int, cutoff_ms: int) -> int | None:
        """The furthest boundary with `after_bytes` behind the head and nothing younger than
        `cutoff_ms` before it, or None."""
        found = self._due(after_bytes, cutoff_ms)
        return None if found is None else found.offset

    def due_bytes(self, after_bytes: int, cutoff_ms: int) -> int:
        """Bytes past the last tiered boundary that are due to be tiered: the tier lag."""
        found = self._due(after_bytes, cutoff_ms)
        return 0 if found is None else found.before - self.base

    def _due(self, after_bytes: int, cutoff_ms: int) -> Sample | None:
        found = None
        for sample in self.samples:
            if self.total - sample.before < after_bytes or sample.newest_ms > cutoff_ms:
                break
            found = sample
        return found

    def tiered(self, end: int) -> None:
        """Everything below `end` is tiered: its samples are no longer needed."""
        while self.samples and self.samples[0].offset <= end:
            self.base = self.samples.popleft().before

    @property
    def hot_bytes(self) -> int:
        """Bytes still in Kafka past the last tiered boundary (to within one sample)."""
        return self.total - self.base
