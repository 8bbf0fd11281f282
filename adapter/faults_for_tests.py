"""The faults the test suites plant in a real server process: none of them is a setting.

Never for production: nothing a deployment configures turns one on (a config file with the
`[testing]` table they once were is refused). `tests/faulty_adapter.py` runs the console script
with them, for the fault suite and the tests that must lose a commit or an owner in a real
process, or show that the fault suite's checker reports a broken build. What each breaks:
`adapter/log/faults.py`, `adapter/tier/faults.py` and `adapter/state/faults.py`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from adapter.log.faults import WriterFaults

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PlantedFaults:
    """What the test suites break in one server; the default breaks nothing."""

    # One commit in every N (across the instance's write slots) loses its EndTxn reply, the
    # next such one its request, in turn: the fault suite's `endtxn_lost`.
    lose_commit_every: int = 0
    # The broken build: a commit whose outcome is unknown is answered 503 without learning it.
    trust_unknown_outcomes: bool = False
    # Exit (137, as after kill -9) right after committing a forwarded append, before answering.
    crash_after_forwarded_commit: bool = False
    # The broken build: reads below a stream's earliest retained offset served, not 410.
    serve_below_retention: bool = False
    # The broken cold tier: every tiered range reads as empty.
    cold_reads_empty: bool = False
    # The broken cold tier: ranges committed (and Kafka freed) with no chunk stored.
    tier_skip_puts: bool = False
    # The broken build: a slot's new owner takes each partition for covered up to its end.
    cover_to_the_end: bool = False

    @property
    def any(self) -> bool:
        return self != NO_FAULTS

    def writer_faults(self) -> WriterFaults:
        """The slot writers' share of the faults (one object, shared by every writer)."""
        return WriterFaults(
            every=self.lose_commit_every,
            trust_unknown_outcomes=self.trust_unknown_outcomes,
            crash_after_forwarded_commit=self.crash_after_forwarded_commit,
        )

    def warn(self) -> None:
        """Say loudly in the log that this server is broken on purpose."""
        if self.any:
            log.warning("test-only faults planted: %s", self)


NO_FAULTS = PlantedFaults()
