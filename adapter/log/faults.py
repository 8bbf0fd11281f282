"""Test-only fault injection of the writer: commits whose EndTxn request or reply is lost,
and a switch that breaks the build (an unknown outcome answered 503 without learning it).

Never for production: `lose_commit_every` and `trust_unknown_outcomes` exist so the fault suite
can lose commits in a real process and show its checker fails on a broken build.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass
class WriterFaults:
    """Shared by every writer of an instance (each on its own thread), hence the lock."""

    drop_commit_requests: int = 0  # the next N commits never reach the coordinator: they abort
    drop_commit_replies: int = 0  # the next N commits happen, their answers are lost
    # One commit in every `every` loses something: its reply, and the next such its request.
    every: int = 0
    # The broken build: an unknown outcome is answered 503 on a guess, never learned.
    trust_unknown_outcomes: bool = False
    _commits: int = field(default=0, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def next_commit(self) -> tuple[bool, bool]:
        """Whether this commit loses its (request, reply); called once per transaction."""
        with self._lock:
            if self.drop_commit_requests > 0:
                self.drop_commit_requests -= 1
                return True, False
            if self.drop_commit_replies > 0:
                self.drop_commit_replies -= 1
                return False, True
            if self.every <= 0:
                return False, False
            self._commits += 1
            if self._commits % self.every:
                return False, False
            request = (self._commits // self.every) % 2 == 0
            return request, not request
