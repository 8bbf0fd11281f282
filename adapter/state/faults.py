"""A test-only broken build of the slots' recovery, which the fault suite's checker must catch.

Never for production: `cover_to_the_end` tells a slot's new owner that each of the slot's
partitions is covered up to its end (`state/covered_offsets.py`): every record is taken for
one its stream's state records show, as a covered offset computed too high would have it. The
takeover then scans nothing: the appends no checkpoint wrote are missing from their streams'
tails and producer states. It exists so that `tests/faults/test_broken_build.py` can show the
checker reports such a build.
"""

from __future__ import annotations

from adapter.state.covered_offsets import CoveredOffsets, Place


class CoveredToTheEnd(CoveredOffsets):
    """Every partition read is covered up to its end."""

    async def read(self, places: dict[Place, int]) -> dict[Place, int]:
        ends = {}
        for topic, partition in places:
            _start, end = await self.scanner.watermarks(topic, partition)
            ends[(topic, partition)] = end
        return ends
