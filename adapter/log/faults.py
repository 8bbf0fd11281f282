"""Test-only fault injection of the writer: commits whose EndTxn request or reply is lost, a
process that dies right after committing a forwarded append (before answering), and a switch
that breaks the build (an unknown outcome answered 503 without learning it).

Never for production: planted only by the test suites (`adapter/faults_for_tests.py`), so they
can lose commits and owners in a real process and show the fault suite's checker fails on a
broken build.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from adapter.log.write_batches import Record
from topology.wire import FORWARD_HEADER

log = logging.getLogger(__name__)


@dataclass
class WriterFaults:
    """Shared by every writer of an instance (each on its own thread), hence the lock."""

    drop_commit_requests: int = 0  # the next N commits never reach the coordinator: they abort
    drop_commit_replies: int = 0  # the next N commits happen, their answers are lost
    # One commit in every `every` loses something: its reply, and the next such its request.
    every: int = 0
    # The broken build: an unknown outcome is answered 503 on a guess, never learned.
    trust_unknown_outcomes: bool = False
    # Die (exit 137, as kill -9) right after committing a transaction holding a forwarded
    # append: its forwarder must learn the outcome from the log.
    crash_after_forwarded_commit: bool = False
    _commits: int = field(default=0, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def any(self) -> bool:
        return bool(self.every or self.trust_unknown_outcomes or self.crash_after_forwarded_commit)

    def committed(self, records: Iterable[Record]) -> None:
        """Called on the writer's thread after each commit."""
        if self.crash_after_forwarded_commit and any(_forwarded(r) for r in records):
            log.warning("test fault: exiting right after committing a forwarded append")
            logging.shutdown()
            os._exit(137)

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


def _forwarded(record: Record) -> bool:
    return any(name == FORWARD_HEADER for name, _ in record.headers)
